package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `--version` names the commit the binary was built from, not "dev".
func TestVersionNamesTheBuild(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse: %v", err)
	}
	got := warren(t, "--version")
	if want := strings.TrimSpace(string(head)); !strings.Contains(got, want) {
		t.Fatalf("warren --version = %q, want the commit %s in it", got, want)
	}
}

// Flags after positional arguments are flags, as users type them.
func TestFlagsAfterPositionalArguments(t *testing.T) {
	ws := jailDir(t) // the board's jail writes its file
	data := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	warren(t, "task", "add", "Write the release notes", "--workspace", ws, "--data-dir", data)
	board, err := os.ReadFile(filepath.Join(ws, "docs", "TASKS.md"))
	if err != nil {
		t.Fatalf("the board of --workspace was not written: %v", err)
	}
	if !strings.Contains(string(board), "Write the release notes") {
		t.Fatalf("board:\n%s", board)
	}
	if strings.Contains(string(board), "--workspace") {
		t.Fatalf("the flag became part of the title:\n%s", board)
	}
}

// `session exec ID -- echo 'a   b'` keeps the quoting the user typed; one
// argument is still a whole command line.
func TestSessionExecKeepsQuoting(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	id := strings.TrimSpace(warren(t, "session", "create", "--data-dir", data, "--name", "q"))
	if i := strings.LastIndex(id, "s-"); i >= 0 {
		id = strings.Fields(id[i:])[0]
	}
	if got := warren(t, "session", "exec", "--data-dir", data, id, "--", "echo", "a   b", "it's"); got != "a   b it's\n" {
		t.Fatalf("exec of several arguments printed %q, want %q", got, "a   b it's\n")
	}
	if got := warren(t, "session", "exec", "--data-dir", data, id, "--", "echo one && echo two"); got != "one\ntwo\n" {
		t.Fatalf("exec of one command line printed %q", got)
	}
}

// With no PATH at all (a bare systemd unit, env -i), bwrap is still found
// where distributions install it, and jails work.
func TestEmptyPathStillFindsBwrap(t *testing.T) {
	needJail(t)
	cmd := exec.Command(warrenBin, "doctor")
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "not installed") {
		t.Fatalf("warren doctor with no PATH: %v\n%s", err, out)
	}
}

// `warren task ls --json` prints what the task_list tool returns, field for
// field, so a script can use either.
func TestTaskListJSONMatchesTheTool(t *testing.T) {
	needJail(t)
	ws, data := jailDir(t), jailDir(t)
	c := serveStdio(t, "--workspace", ws, "--data-dir", data)
	c.ok("task_add", map[string]any{"title": "Same everywhere"})
	c.ok("task_claim", map[string]any{"task_id": "T-1"})
	c.ok("task_update", map[string]any{"task_id": "T-1", "note": "a note"})
	tool := c.ok("task_list", nil)
	var cli map[string]any
	out := warren(t, "task", "ls", "--json", "--workspace", ws, "--data-dir", data)
	if err := json.Unmarshal([]byte(out), &cli); err != nil {
		t.Fatalf("task ls --json: %v\n%s", err, out)
	}
	want, _ := json.Marshal(tool["tasks"])
	got, _ := json.Marshal(cli["tasks"])
	if string(got) != string(want) {
		t.Fatalf("task ls --json tasks:\n%s\nthe task_list tool:\n%s", got, want)
	}
}

// task_list merges a hand edit of TASKS.md into the board's database, so it
// must not tell clients it is read-only: agents in read-only mode and
// clients that auto-approve read-only tools rely on the hint.
func TestTaskListWritesSoItIsNotReadOnly(t *testing.T) {
	needJail(t)
	ws, data := jailDir(t), jailDir(t)
	c := serveStdio(t, "--workspace", ws, "--data-dir", data)
	c.ok("task_add", map[string]any{"title": "First"})
	board := filepath.Join(ws, "docs", "TASKS.md")
	waitFor(t, "the board's first write", 10*time.Second, func() bool {
		b, _ := os.ReadFile(board)
		return strings.Contains(string(b), "T-1 First")
	})
	f, err := os.OpenFile(board, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("- [ ] T-2 Added by hand\n")
	f.Close()
	c.ok("task_list", nil)
	db, err := openDB(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM tasks WHERE title = 'Added by hand'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("task_list did not write the hand edit into the board: %d rows, %v", n, err)
	}
	tools, err := c.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "task_list" && tool.Annotations != nil && tool.Annotations.ReadOnlyHint {
			t.Fatal("task_list writes the board but is annotated readOnlyHint: true")
		}
	}
}
