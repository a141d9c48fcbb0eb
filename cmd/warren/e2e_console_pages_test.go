package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleActivityShowsAnotherClientLive: the activity feed shows,
// live, a shell_exec that a separate go-sdk client makes in the same
// session: its command, its output while it runs, its outcome.
func TestConsoleActivityShowsAnotherClientLive(t *testing.T) {
	needJail(t)
	srv := startConsole(t, jailDir(t), "127.0.0.1:0")
	agent := connectHTTP(t, srv.mcpURL(), srv.token)
	session := agent.exec("echo warming up")["session_id"].(string)

	b := signedIn(t, srv)
	b.run("open the activity", chromedp.Navigate(srv.base+"/#/s/"+session+"/activity"))
	b.waitJS("the earlier call", `[...document.querySelectorAll(".feed .summary")].some((e) => e.textContent === "echo warming up")`)
	time.Sleep(300 * time.Millisecond) // the feed's long poll is waiting now

	done := make(chan map[string]any, 1)
	start := time.Now()
	go func() { done <- agent.exec("echo from-the-agent; sleep 2; echo agent-finished") }()
	b.waitJS("the agent's output while it runs", `[...document.querySelectorAll(".feed li[data-tool=shell_exec]")].some((li) =>
		li.querySelector(".summary").textContent.includes("from-the-agent") && (li.querySelector(".out") || {}).textContent?.includes("from-the-agent\n"))`)
	select {
	case <-done:
		t.Fatal("the command had ended before the feed showed its first line: the feed is not live")
	default:
	}
	var renderedAt float64
	b.eval(`Number([...document.querySelectorAll(".feed li[data-tool=shell_exec]")].find((li) => li.querySelector(".summary").textContent.includes("from-the-agent")).dataset.renderedAt)`, &renderedAt)
	numbers(t, "session_watch latency, a go-sdk client's shell_exec to its call in the page: %d ms",
		time.UnixMilli(int64(renderedAt)).Sub(start).Milliseconds())
	<-done
	// The outcome of this call (the earlier call's is there already).
	b.waitJS("the outcome", `document.querySelector(".feed li:last-child .summary").textContent.includes("from-the-agent") &&
		document.querySelector(".feed li:last-child .outcome.ok")?.textContent.startsWith("exit 0")`)
	if out := b.text(".feed li:last-child .out"); !strings.Contains(out, "agent-finished") {
		t.Fatalf("the last call's output: %q", out)
	}
	if client := b.text(".feed li:last-child .client"); client != "warren-e2e" {
		t.Fatalf("the call is shown as made by %q", client)
	}
	b.screenshots("activity")
}

// TestConsoleTasksClaimAndDone: an empty board says so in each column; a
// task added through the page's form lands in the workspace's
// docs/TASKS.md; claim a task for a session, then mark it done with a
// link; the board shows who holds it and where it went.
func TestConsoleTasksClaimAndDone(t *testing.T) {
	needJail(t)
	repo := gitRepo(t)
	srv := startConsole(t, jailDir(t), "127.0.0.1:0", "--workspace", repo)
	c := connectHTTP(t, srv.mcpURL(), srv.token)
	session := c.exec("true")["session_id"].(string)

	b := signedIn(t, srv)
	b.run("open the board", chromedp.Navigate(srv.base+"/#/tasks"))
	b.waitJS("the empty board", `document.querySelectorAll(".column").length === 4`)
	var empty []string
	b.pageJSON(`[...document.querySelectorAll(".column")].map((c) => (c.querySelector(".empty") || {}).textContent || "")`, &empty)
	for i, text := range empty {
		if text == "" {
			t.Fatalf("column %d of an empty board is blank: %q", i+1, empty)
		}
	}
	b.run("add a task through the form",
		chromedp.SendKeys("#new-task", "write the release notes"),
		chromedp.Click(`form.add-task button[type="submit"]`))
	b.waitJS("the new task in Open", `[...document.querySelectorAll('section[aria-labelledby="col-open"] li.task .title')].some((e) => e.textContent === "write the release notes")`)
	if v := b.text("#new-task"); v != "" {
		t.Fatalf("the form kept %q after adding", v)
	}
	board := filepath.Join(repo, "docs", "TASKS.md")
	var onDisk []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if onDisk, _ = os.ReadFile(board); strings.Contains(string(onDisk), "- [ ] T-1 write the release notes") {
			break
		}
	}
	if !strings.Contains(string(onDisk), "- [ ] T-1 write the release notes") {
		t.Fatalf("the task added on the page is not in the workspace's docs/TASKS.md:\n%s", onDisk)
	}

	c.ok("task_add", map[string]any{"title": "fix the flaky test"})
	b.run("refresh", chromedp.Evaluate(`[...document.querySelectorAll("main button")].find((x) => x.textContent === "Refresh").click()`, nil))
	b.waitJS("the open tasks", `document.querySelectorAll('section[aria-labelledby="col-open"] li.task').length === 2`)
	b.run("choose the session", chromedp.SetValue("#claim-session", session))
	b.run("claim T-1", chromedp.Click(`li[data-task="T-1"] button[aria-label^="claim"]`))
	b.waitJS("T-1 in progress", `!!document.querySelector('section[aria-labelledby="col-in_progress"] li[data-task="T-1"] .claim')`)
	if claim := b.text(`li[data-task="T-1"] .claim`); !strings.Contains(claim, session) || !strings.Contains(claim, "until") {
		t.Fatalf("claim shown as %q", claim)
	}
	b.screenshots("tasks")
	b.run("mark T-1 done",
		chromedp.SendKeys(`li[data-task="T-1"] input[type=url]`, "https://example.com/pr/1"),
		chromedp.Click(`li[data-task="T-1"] button[aria-label^="mark"]`))
	b.waitJS("T-1 done", `!!document.querySelector('section[aria-labelledby="col-done"] li[data-task="T-1"]')`)
	got := c.ok("task_list", map[string]any{"status": "done"})
	tasks, _ := got["tasks"].([]any)
	if len(tasks) != 1 || tasks[0].(map[string]any)["link"] != "https://example.com/pr/1" {
		t.Fatalf("the board after done: %v", got)
	}
}

// TestConsoleUsageChartIsDrawn: with usage recorded, the usage page draws
// bars of real height, lists the tables and flags an unpriced model.
func TestConsoleUsageChartIsDrawn(t *testing.T) {
	needJail(t)
	srv := startConsole(t, jailDir(t), "127.0.0.1:0")
	c := connectHTTP(t, srv.mcpURL(), srv.token)
	session := c.exec("true")["session_id"].(string)
	c.ok("usage_record", map[string]any{"model": "gpt-4o", "input_tokens": 120000, "output_tokens": 30000, "session_id": session})
	c.ok("usage_record", map[string]any{"model": "mystery-model-9", "input_tokens": 5000, "output_tokens": 800, "session_id": session})

	named := c.ok("session_create", map[string]any{"name": "report-writer"})["session_id"].(string)
	c.ok("usage_record", map[string]any{"model": "gpt-4o", "input_tokens": 1000, "output_tokens": 100, "session_id": named})

	b := signedIn(t, srv)
	b.run("open the usage", chromedp.Navigate(srv.base+"/#/usage"))
	b.waitJS("the chart", `!!document.querySelector("svg.chart rect.bar")`)
	// By session, the table names the sessions; the id is there too, second.
	b.waitJS("the table by session", `document.querySelectorAll(".usage-table tbody tr").length === 2`)
	var rows []struct{ Name, ID string }
	b.pageJSON(`[...document.querySelectorAll(".usage-table tbody th")].map((th) => ({
		Name: th.firstChild.textContent, ID: th.querySelector(".id")?.textContent || "" }))`, &rows)
	if !slices.Contains(rows, struct{ Name, ID string }{"report-writer", named}) {
		t.Fatalf("the table by session shows %+v: want the session's name first, with its id %s", rows, named)
	}
	var bars []float64
	b.pageJSON(`[...document.querySelectorAll("svg.chart rect.bar")].map((r) => r.getBBox().height)`, &bars)
	if len(bars) == 0 || bars[0] < 10 {
		t.Fatalf("bars drawn with heights %v: want a visible bar for today", bars)
	}
	if w := b.text(".totals .warning"); !strings.Contains(w, "mystery-model-9") {
		t.Fatalf("unpriced model not flagged: %q", w)
	}
	b.run("by model", chromedp.SetValue("#usage-group", "model"), chromedp.Evaluate(`document.querySelector("#usage-group").dispatchEvent(new Event("change"))`, nil))
	b.waitJS("the table by model", `document.querySelector(".usage-table caption")?.textContent === "By model" && document.querySelector(".usage-table")?.textContent.includes("gpt-4o")`)
	b.run("chart by tokens", chromedp.SetValue("#usage-metric", "tokens"), chromedp.Evaluate(`document.querySelector("#usage-metric").dispatchEvent(new Event("change"))`, nil))
	b.waitJS("the token chart", `!!document.querySelector("figure.chart-box figcaption")?.textContent.startsWith("Tokens")`)
	b.screenshots("usage")
}

// TestConsoleShowsAStoppedServerAndReconnects: when the server stops the
// page says so, and it comes back by itself when the server does.
func TestConsoleShowsAStoppedServerAndReconnects(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	addr := freeAddr(t)
	srv := startConsole(t, data, addr, "--auth", "none")
	b := newBrowser(t)
	b.run("open the console", chromedp.Navigate(srv.link))
	b.waitJS("the sessions list", `document.body.dataset.sessionsLoaded !== undefined`)
	srv.stop()
	b.run("refresh", chromedp.Click(`main button`))
	b.waitJS("the unreachable state", `document.querySelector(".status").textContent.includes("unreachable")`)
	b.screenshots("offline")
	startConsole(t, data, addr, "--auth", "none")
	b.waitJS("the page back online", `document.querySelector(".status").textContent === "" && !!document.querySelector("main h1")`)
}
