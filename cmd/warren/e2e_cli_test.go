package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `--version` names the commit the binary was built from, not "dev".
func TestVersionNamesTheBuild(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse: %v", err)
	}
	got := warren(t, "--version")
	if want := string(head[:12]); !strings.Contains(got, want) {
		t.Fatalf("warren --version = %q, want the commit %s in it", got, want)
	}
}

// Flags after positional arguments are flags, as users type them.
func TestFlagsAfterPositionalArguments(t *testing.T) {
	ws := t.TempDir()
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
