package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The README's setup, 'serve stdio --workspace DIR', with a jail that
// swaps docs/ between a directory and a link to a host directory, and
// docs/TASKS.md between a file and a link to a root-only decoy, while the
// agent uses the board: nothing is created outside, the decoy never shows
// up, and a FIFO as the board gives a prompt, clear answer.
func TestTaskBoardJailSwapsLinks(t *testing.T) {
	needJail(t)
	data, ws, outside := t.TempDir(), jailDir(t), t.TempDir()
	decoy := filepath.Join(outside, "shadow")
	const secret = "root:$6$decoy-secret-hash:19000:0:99999:7:::"
	if err := os.WriteFile(decoy, []byte(secret+"\n- [ ] T-9 Decoy task\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := serveStdio(t, "--data-dir", data, "--workspace", ws)
	// The jail's loop runs in the foreground of one call while the agent
	// uses the board in others.
	swapped := make(chan map[string]any, 1)
	go func() {
		swapped <- agent.exec(fmt.Sprintf(`cd /workspace; end=$(( $(date +%%s) + 3 )); while [ $(date +%%s) -lt $end ]; do
			mkdir -p d.real; ln -sfn %[1]s d.real/TASKS.md; mv -T d.real docs
			ln -sfn %[2]s d.link; mv -T docs d.real; mv -T d.link docs; rm -f docs
		done 2>/dev/null; rm -rf docs d.real d.link; echo swapped`, decoy, outside))
	}()
	var said []string
	for done := false; !done; {
		said = append(said, textOf(agent.call("task_add", map[string]any{"title": "Race"})),
			textOf(agent.call("task_list", map[string]any{})))
		select {
		case r := <-swapped:
			if !strings.Contains(fmt.Sprint(r["stdout"]), "swapped") {
				t.Fatalf("the jail's loop: %v", r)
			}
			done = true
		default:
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Fatalf("the board created files outside the workspace: %v", entries)
	}
	if b, err := os.ReadFile(decoy); err != nil || string(b) != secret+"\n- [ ] T-9 Decoy task\n" {
		t.Fatalf("decoy changed: %q %v", b, err)
	}
	if fi, _ := os.Stat(decoy); fi.Mode().Perm() != 0o600 {
		t.Fatalf("decoy mode changed: %v", fi.Mode())
	}
	for _, s := range said {
		if strings.Contains(s, "decoy-secret") || strings.Contains(s, "Decoy task") {
			t.Fatalf("the decoy leaked into a result: %s", s)
		}
	}
	filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "decoy-secret") {
				t.Fatalf("the decoy was copied into the workspace: %s", p)
			}
		}
		return nil
	})

	// A FIFO as the board: every call answers at once and says why.
	r := agent.exec("mkdir -p /workspace/docs && rm -f /workspace/docs/TASKS.md && mkfifo /workspace/docs/TASKS.md && ls -la /workspace /workspace/docs")
	if r["exit_code"] != float64(0) {
		t.Fatalf("mkfifo in the jail: %v", r)
	}
	list := agent.ok("task_list", map[string]any{})
	if w, _ := list["warning"].(string); !strings.Contains(w, "is not a regular file (a FIFO)") || len(list["tasks"].([]any)) == 0 {
		t.Fatalf("task_list with a FIFO board: warning %q\n%s", list["warning"], r["stdout"])
	}
	got := agent.ok("task_add", map[string]any{"title": "Still works"})
	if w, _ := got["warning"].(string); !strings.Contains(w, "a FIFO") {
		t.Fatalf("task_add with a FIFO board: %v", got)
	}
}

// Issue 10 item 13: a workspace without docs/ gets its board written.
func TestTaskBoardWithoutDocsDir(t *testing.T) {
	data, ws := t.TempDir(), jailDir(t) // the board's jail, as a session's, must reach it
	agent := serveStdio(t, "--data-dir", data, "--workspace", ws)
	got := agent.ok("task_add", map[string]any{"title": "First"})
	if w, ok := got["warning"]; ok {
		t.Fatalf("task_add without docs/ warns: %v", w)
	}
	list := agent.ok("task_list", map[string]any{})
	if w, ok := list["warning"]; ok {
		t.Fatalf("task_list without docs/ warns: %v", w)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "docs", "TASKS.md")); err != nil || string(b) != "- [ ] T-1 First\n" {
		t.Fatalf("docs/TASKS.md = %q, %v", b, err)
	}
}

// The board's runner is in a jail of its own: a session that kills every
// process it can (its uid is the board runner's, the workspace's owner)
// and replaces the board's file by hand leaves the board working, its
// file written by the board's runner, never by the session's.
func TestTaskBoardSurvivesASessionKillingEverything(t *testing.T) {
	needJail(t)
	data, ws := t.TempDir(), jailDir(t)
	agent := serveStdio(t, "--data-dir", data, "--workspace", ws)
	if got := agent.ok("task_add", map[string]any{"title": "Before"}); got["warning"] != nil {
		t.Fatalf("task_add: %v", got["warning"])
	}
	agent.call("shell_exec", map[string]any{"command": "kill -9 -1; sleep 1"})
	agent.exec("printf -- '- [ ] T-1 Before, edited\\n' > /workspace/docs/TASKS.md.new && mv /workspace/docs/TASKS.md.new /workspace/docs/TASKS.md")
	got := agent.ok("task_add", map[string]any{"title": "After"})
	if got["warning"] != nil {
		t.Fatalf("task_add after the session killed what it could: %v", got["warning"])
	}
	b, err := os.ReadFile(filepath.Join(ws, "docs", "TASKS.md"))
	if err != nil || string(b) != "- [ ] T-1 Before, edited\n- [ ] T-2 After\n" {
		t.Fatalf("docs/TASKS.md = %q, %v", b, err)
	}
}
