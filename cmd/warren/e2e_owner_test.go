package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/warrenhq/warren/sessions/workspace/gittest"
)

// TestRootServerKeepsABoundCheckoutOwned: a server running as root (as in
// CI) works in a root-owned git checkout through a jail running as another
// uid. Afterwards the checkout still belongs to root and git still works in
// it: the tree is shared with the jail, never given away.
func TestRootServerKeepsABoundCheckoutOwned(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a server running as root hands workspaces to another uid")
	}
	dir := jailDir(t)
	git := gittest.Git(t, dir)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "init")

	c := serveStdio(t, "--workspace", dir, "--data-dir", jailDir(t))
	c.ok("edit_file", map[string]any{"path": "main.go", "old_text": "func main() {}", "new_text": "func main() { println(1) }"})
	c.ok("write_file", map[string]any{"path": "pkg/new.go", "content": "package pkg\n"})
	// The jail can still write both, after the server replaced one and created the other.
	if r := c.exec("echo '// jail' >> main.go && echo '// jail' >> pkg/new.go && echo ok"); strings.TrimSpace(r["stdout"].(string)) != "ok" {
		t.Fatalf("the jail cannot write after the file tools: %v", r)
	}
	// The checkout and its repository stay root's. A file the tools
	// replaced belongs to the jail's uid, as one the jail's own 'sed -i'
	// replaced would: the runner that writes it is the jail's user (it
	// cannot give a file to root, and the server no longer touches the
	// workspace); the ACL it keeps shares it with root.
	for _, p := range []string{dir, filepath.Join(dir, ".git")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 0 {
			t.Errorf("%s now belongs to uid %d, not root", p, uid)
		}
	}
	st := git("status", "--porcelain")
	if !strings.Contains(st, "M main.go") || !strings.Contains(st, "?? pkg/") {
		t.Errorf("git status in the checkout: %q", st)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "main.go"))
	if !strings.Contains(string(b), "println(1)") || !strings.HasSuffix(string(b), "// jail\n") {
		t.Errorf("main.go: %q", b)
	}
}
