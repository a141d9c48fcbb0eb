package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestASwappedWorkspaceIsRefusedWhileItsShellRuns: the operator's bound
// directory is replaced by a link to /usr/share while the session's shell
// runs. The running jail keeps the directory it mounted, but no call uses
// the path any more: the shell (whose next start would mount the path) and
// every file tool refuse, and /usr/share gets nothing. Put back, the
// session works again.
func TestASwappedWorkspaceIsRefusedWhileItsShellRuns(t *testing.T) {
	needJail(t)
	parent := jailDir(t)
	ws := filepath.Join(parent, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	c := serveStdio(t, "--workspace", ws, "--data-dir", jailDir(t))
	c.exec("echo mine > note.txt")
	if err := os.Rename(ws, ws+"-moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/share", ws); err != nil {
		t.Fatal(err)
	}
	name := "warren-e2e-" + filepath.Base(parent)
	t.Cleanup(func() { os.Remove(filepath.Join("/usr/share", name)) })
	c.fails("shell_exec", map[string]any{"command": "ls"}, "system directory")
	c.fails("read_file", map[string]any{"path": "misc/magic"}, "system directory")
	c.fails("write_file", map[string]any{"path": name, "content": "x"}, "system directory")
	c.fails("edit_file", map[string]any{"path": "note.txt", "old_text": "mine", "new_text": "x"}, "system directory")
	c.fails("session_diff", map[string]any{}, "system directory")
	if _, err := os.Stat(filepath.Join("/usr/share", name)); err == nil {
		t.Errorf("write_file created /usr/share/%s", name)
	}
	if err := os.Remove(ws); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(ws+"-moved", ws); err != nil {
		t.Fatal(err)
	}
	if out := c.exec("cat note.txt"); out["stdout"] != "mine\n" {
		t.Errorf("cat note.txt once the directory is back: %v", out["stdout"])
	}
}
