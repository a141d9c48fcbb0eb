package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestConsoleActivitySetsTheConsolesOwnCallsApart: the calls the console
// makes itself (the Files tab's listing, the Diff tab's session_diff) are
// marked as the console's by the server, from how the request was signed
// in, not from the name a client gives: the feed hides them behind a
// toggle and shows them marked; a client that calls itself
// "warren-console" is still an agent.
func TestConsoleActivitySetsTheConsolesOwnCallsApart(t *testing.T) {
	needJail(t)
	srv := startConsole(t, jailDir(t), "127.0.0.1:0")
	agent := connectHTTP(t, srv.mcpURL(), srv.token)
	session := agent.exec("echo from-the-agent")["session_id"].(string)
	spoof := sdk.NewClient(&sdk.Implementation{Name: "warren-console", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := spoof.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: srv.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{srv.token, http.DefaultTransport}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "shell_exec", Arguments: map[string]any{"session_id": session, "command": "echo impostor"}}); err != nil || res.IsError {
		t.Fatalf("the impostor's call: %v %v", err, res)
	}

	b := signedIn(t, srv)
	b.run("open the files", chromedp.Navigate(srv.base+"/#/s/"+session+"/files"))
	b.waitJS("the file tree", `!!document.querySelector(".tree")`)
	b.run("open the diff", chromedp.Navigate(srv.base+"/#/s/"+session+"/diff"))
	b.waitJS("the diff", `!!document.querySelector(".diffs")`)
	b.run("open the activity", chromedp.Navigate(srv.base+"/#/s/"+session+"/activity"))
	b.waitJS("the agent's calls", `[...document.querySelectorAll(".feed .summary")].some((e) => e.textContent === "echo impostor")`)

	// What a person sees: the agents' calls, and a toggle for the console's.
	visible := func() (tools []string) {
		b.pageJSON(`[...document.querySelectorAll(".feed li")].filter((li) => li.offsetParent !== null).map((li) =>
			li.dataset.tool + (li.classList.contains("console") ? " (console)" : "") + ": " + li.querySelector(".summary").textContent)`, &tools)
		return tools
	}
	shown := visible()
	for _, call := range shown {
		if strings.Contains(call, "session_diff") || strings.Contains(call, "find ") {
			t.Fatalf("the console's own call is shown among the agents': %q (all: %q)", call, shown)
		}
	}
	if !slices.Contains(shown, "shell_exec: echo impostor") || !slices.Contains(shown, "shell_exec: echo from-the-agent") {
		t.Fatalf("the agents' calls: %q", shown)
	}
	b.waitJS("the toggle counts the console's calls", `/\(2\)/.test(document.querySelector("label[for=show-console]")?.textContent || "")`)
	b.run("show the console's calls", chromedp.Click("#show-console"))
	shown = visible()
	var marked int
	for _, call := range shown {
		if strings.Contains(call, "(console)") {
			marked++
			if !strings.HasPrefix(call, "session_diff (console)") && !strings.HasPrefix(call, "shell_exec (console): find ") {
				t.Fatalf("marked as the console's: %q", call)
			}
		}
	}
	if marked != 2 {
		t.Fatalf("%d calls marked as the console's, want 2 (the listing and the diff): %q", marked, shown)
	}
	if who := b.text(".feed li.console .client"); who != "console" {
		t.Fatalf("the console's call is shown as made by %q", who)
	}

	// The same, for any MCP client reading the log.
	events := agent.ok("session_watch", map[string]any{"session_id": session})["events"].([]any)
	for _, e := range events {
		e := e.(map[string]any)
		if e["kind"] != "call" {
			continue
		}
		byConsole, _ := e["console"].(bool)
		if want := e["tool"] == "session_diff" || strings.HasPrefix(e["summary"].(string), "find "); byConsole != want {
			t.Fatalf("session_watch: %v has console=%v", e, byConsole)
		}
	}
}
