package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// warren runs the CLI against a data dir and returns its stdout; it fails
// the test when the command fails.
func warren(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(warrenBin, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("warren %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// warrenFails runs the CLI, requires it to fail, and returns its stderr.
func warrenFails(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(warrenBin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("warren %s succeeded, want a failure", strings.Join(args, " "))
	}
	return stderr.String()
}

// Four agents, as four users on two server processes sharing one data
// dir, race to claim one task: exactly one wins, every other one is told
// who holds it.
func TestTaskClaimRaceOverMCP(t *testing.T) {
	data := t.TempDir()
	warren(t, "task", "add", "--data-dir", data, "Race me")
	users := []string{"alice", "bob", "carol", "dave"}
	tokens := map[string]string{}
	for _, u := range users {
		tokens[u] = createToken(t, data, u)
	}
	servers := []*httpServer{serveHTTP(t, "--data-dir", data), serveHTTP(t, "--data-dir", data)}
	clients := map[string]*client{}
	for i, u := range users {
		clients[u] = connectHTTP(t, servers[i%2], tokens[u])
	}

	type outcome struct {
		user string
		res  *sdk.CallToolResult
		err  error
	}
	start := make(chan struct{})
	results := make(chan outcome, len(users))
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := clients[u].cs.CallTool(ctx, &sdk.CallToolParams{Name: "task_claim", Arguments: map[string]any{"task_id": "T-1"}})
			results <- outcome{u, res, err}
		}()
	}
	close(start)
	wg.Wait()
	close(results)
	var winner string
	var losers []outcome
	for o := range results {
		if o.err != nil {
			t.Fatalf("%s: protocol error: %v", o.user, o.err)
		}
		if !o.res.IsError {
			if winner != "" {
				t.Fatalf("both %s and %s won the claim", winner, o.user)
			}
			winner = o.user
			continue
		}
		losers = append(losers, o)
	}
	if winner == "" {
		t.Fatal("nobody won the claim")
	}
	for _, o := range losers {
		if msg := textOf(o.res); !strings.Contains(msg, "claimed by "+winner+" (session s-") {
			t.Errorf("%s lost with %q, which does not name the holder %s", o.user, msg, winner)
		}
	}

	win, lose := clients[winner], clients[losers[0].user]
	// A non-holder cannot complete it, nor note it; the holder can.
	lose.fails("task_update", map[string]any{"task_id": "T-1", "status": "done"}, "claimed by "+winner)
	lose.fails("task_update", map[string]any{"task_id": "T-1", "note": "mine now"}, "claimed by "+winner)
	// Bad input is a clear tool error.
	win.fails("task_update", map[string]any{"task_id": "T-1", "status": "finished"}, `invalid status "finished": use one of open, in_progress, blocked, done`)
	win.fails("task_claim", map[string]any{"task_id": "T-99"}, "no task T-99")
	win.fails("task_claim", map[string]any{"task_id": "twelve"}, "invalid task id")
	win.fails("task_add", map[string]any{"title": "  "}, "title is empty")
	// Another user's session is not found, never "forbidden".
	other := lose.ok("usage_record", map[string]any{"model": "gpt-4o", "input_tokens": 1, "output_tokens": 1})
	win.fails("task_claim", map[string]any{"task_id": "T-1", "session_id": other["session_id"]}, "session not found")

	got := win.ok("task_update", map[string]any{"task_id": "T-1", "note": "works now"})
	if task := got["task"].(map[string]any); task["status"] != "in_progress" || task["owner"] != winner {
		t.Fatalf("after note: %v", task)
	}
	got = win.ok("task_update", map[string]any{"task_id": "T-1", "status": "done", "link": "https://example.com/pr/1"})
	if task := got["task"].(map[string]any); task["status"] != "done" || task["claim"] != nil {
		t.Fatalf("done should release the claim: %v", task)
	}
	list := lose.ok("task_list", map[string]any{"status": "done"})
	if tasks := list["tasks"].([]any); len(tasks) != 1 || tasks[0].(map[string]any)["link"] != "https://example.com/pr/1" {
		t.Fatalf("task_list done: %v", list)
	}
	b, err := os.ReadFile(filepath.Join(data, "TASKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- [x] T-1 Race me @" + winner, "@" + winner + ": works now", "  - link: https://example.com/pr/1"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("TASKS.md lacks %q:\n%s", want, b)
		}
	}
}

func TestTaskCLI(t *testing.T) {
	data, ws := jailDir(t), jailDir(t)
	board := filepath.Join(ws, "docs", "TASKS.md")
	if err := os.MkdirAll(filepath.Dir(board), 0o755); err != nil {
		t.Fatal(err)
	}
	// A hand-written board: prose and other lists must survive.
	hand := "# Tasks\n\nSome prose.\n\n- [ ] T-3 Existing task\n- [ ] not a task\n"
	if err := os.WriteFile(board, []byte(hand), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		return warren(t, append([]string{"task", args[0], "--data-dir", data, "--workspace", ws}, args[1:]...)...)
	}
	if out := run("add", "Write", "the", "docs"); !strings.Contains(out, "added T-4 [open] Write the docs") {
		t.Fatalf("add: %q", out)
	}
	run("claim", "T-4")
	run("note", "T-4", "half", "way")
	if out := run("done", "--link", "abc123", "T-4"); !strings.Contains(out, "done T-4 [done] Write the docs abc123") {
		t.Fatalf("done: %q", out)
	}
	ls := run("ls")
	if !strings.Contains(ls, "T-3  open") || !strings.Contains(ls, "T-4  done") {
		t.Fatalf("ls:\n%s", ls)
	}
	b, _ := os.ReadFile(board)
	if !strings.HasPrefix(string(b), "# Tasks\n\nSome prose.\n\n- [ ] T-3 Existing task\n") || !strings.Contains(string(b), "\n- [ ] not a task\n") ||
		!strings.Contains(string(b), ": half way\n") || !strings.Contains(string(b), "  - link: abc123\n") {
		t.Fatalf("TASKS.md:\n%s", b)
	}

	// Hand edits are merged by sync.
	if err := os.WriteFile(board, []byte(strings.Replace(string(b), "Existing task", "Edited by hand", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run("sync"); !strings.Contains(out, "imported T-3") {
		t.Fatalf("sync: %q", out)
	}
	if out := run("ls", "--status", "open"); !strings.Contains(out, "Edited by hand") || strings.Contains(out, "T-4") {
		t.Fatalf("ls --status open:\n%s", out)
	}

	// Errors say what is wrong.
	base := []string{"--data-dir", data, "--workspace", ws}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"task", "done", "T-3"}, "T-3 is not claimed"},
		{[]string{"task", "claim", "T-9"}, "no task T-9"},
		{[]string{"task", "ls", "--status", "finished"}, "invalid status"},
		{[]string{"task", "note", "T-3", "text", "--statuz", "blocked"}, "--statuz is not a flag of warren task note"},
	} {
		args := append(append(tc.args[:2:2], base...), tc.args[2:]...)
		if msg := warrenFails(t, args...); !strings.Contains(msg, tc.want) {
			t.Errorf("warren %v: %q does not say %q", tc.args, msg, tc.want)
		}
	}

	// --tasks overrides the board; a bad config file is named with its error.
	other := filepath.Join(t.TempDir(), "OTHER.md")
	warren(t, "task", "add", "--data-dir", data, "--tasks", other, "Elsewhere")
	if b, _ := os.ReadFile(other); string(b) != "- [ ] T-1 Elsewhere\n" {
		t.Fatalf("--tasks: %q", b)
	}
	cfg := filepath.Join(data, "config.json")
	os.WriteFile(cfg, []byte("{\n  \"metering\": {\"retention_days\": 30,}\n}\n"), 0o644)
	if msg := warrenFails(t, "task", "ls", "--data-dir", data); !strings.Contains(msg, cfg+": line 2: invalid character '}'") {
		t.Fatalf("malformed config: %q", msg)
	}
	os.WriteFile(cfg, []byte(`{"tasks_file": "board.md"}`), 0o644)
	warren(t, "task", "add", "--data-dir", data, "From the config")
	if b, _ := os.ReadFile(filepath.Join(data, "board.md")); string(b) != "- [ ] T-1 From the config\n" {
		t.Fatalf("tasks_file: %q", b)
	}
}

// A claim is released when its session is archived: another session can
// take the task at once, without waiting for the lease to end.
func TestArchivingASessionReleasesItsClaims(t *testing.T) {
	data := jailDir(t)
	agent := serveStdio(t, "--data-dir", data)
	agent.ok("task_add", map[string]any{"title": "Hand over"})
	s := agent.ok("session_create", map[string]any{"name": "short-lived"})
	id := s["session_id"].(string)
	agent.ok("task_claim", map[string]any{"task_id": "T-1", "session_id": id})
	agent.fails("task_claim", map[string]any{"task_id": "T-1"}, "claimed by")
	agent.ok("session_control", map[string]any{"session_id": id, "action": "archive"})
	list := agent.ok("task_list", map[string]any{})
	if task := list["tasks"].([]any)[0].(map[string]any); task["claim"] != nil {
		t.Fatalf("claim survived the archive: %v", task)
	}
	got := agent.ok("task_claim", map[string]any{"task_id": "T-1"})
	if claim := got["task"].(map[string]any)["claim"].(map[string]any); claim["session_id"] == id {
		t.Fatalf("claimed by the archived session: %v", claim)
	}
}

// An agent that adds or updates a task and then reads docs/TASKS.md in
// its shell (to commit it, say) sees its change: a task tool returns only
// once the file holds it (issue 21, item 7).
func TestTaskToolsReadYourWrites(t *testing.T) {
	needJail(t)
	ws := jailDir(t)
	user := serveStdio(t, "--workspace", ws, "--data-dir", jailDir(t))
	const rounds = 15
	for i := range rounds {
		title := fmt.Sprintf("Task number %d", i)
		added := user.ok("task_add", map[string]any{"title": title})
		task, _ := added["task"].(map[string]any)
		id, _ := task["id"].(string)
		if id == "" || added["warning"] != nil {
			t.Fatalf("task_add: %v", added)
		}
		out := user.exec("cat docs/TASKS.md")
		if want := "- [ ] " + id + " " + title + "\n"; !strings.Contains(fmt.Sprint(out["stdout"]), want) {
			t.Fatalf("round %d: right after task_add, docs/TASKS.md in the shell has no %q:\n%v", i, want, out["stdout"])
		}
		note := fmt.Sprintf("note %d", i)
		user.ok("task_update", map[string]any{"task_id": id, "status": "blocked", "note": note})
		out = user.exec("grep -A1 -F -- '" + id + " ' docs/TASKS.md")
		got := fmt.Sprint(out["stdout"])
		if !strings.Contains(got, "- [!] "+id+" "+title+"\n") || !strings.Contains(got, ": "+note+"\n") {
			t.Fatalf("round %d: right after task_update, docs/TASKS.md in the shell shows:\n%s", i, got)
		}
	}
}
