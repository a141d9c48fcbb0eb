package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/warrenhq/warren/sessions/workspace/gittest"
)

// TestRootOwnedWorkspaceIsSharedNotGivenAway runs where the server is root
// (as in CI): a root-owned checkout must stay root's — git refuses a
// repository owned by another user — while the jail's uid works in it.
func TestRootOwnedWorkspaceIsSharedNotGivenAway(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a server running as root hands workspaces to another uid")
	}
	dir := testWorkspace(t)
	git := gittest.Git(t, dir)
	os.MkdirAll(filepath.Join(dir, "src"), 0o755)
	os.WriteFile(filepath.Join(dir, "src", "main.go"), []byte("package main\n"), 0o644)
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "init")

	sh, err := NewShell(DefaultProfile(dir), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	expectOut(t, sh, "echo edited >> src/main.go && mkdir -p new/deep && echo x > new/deep/f && echo ok", 0, "ok")

	for _, p := range []string{dir, filepath.Join(dir, ".git"), filepath.Join(dir, "src", "main.go")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 0 {
			t.Errorf("%s now belongs to uid %d", p, uid)
		}
	}
	// git inside the jail works too, although the checkout belongs to a
	// uid the jail cannot map.
	if res := mustRun(t, sh, "git status --porcelain"); res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "src/main.go") {
		t.Errorf("git status in the jail: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if st := git("status", "--porcelain"); !strings.Contains(st, "src/main.go") || !strings.Contains(st, "new/") {
		t.Errorf("git status after the jail's edits: %q", st)
	}
	// A file root creates later inherits the default ACL, masked by its
	// mode: 0664 is writable by the jail, 0644 readable.
	os.WriteFile(filepath.Join(dir, "src", "later.txt"), []byte("root wrote this\n"), 0o664)
	expectOut(t, sh, "echo jail >> src/later.txt && echo ok", 0, "ok")
	os.WriteFile(filepath.Join(dir, "src", "ro.txt"), []byte("read me\n"), 0o644)
	expectOut(t, sh, "cat src/ro.txt", 0, "read me")
	// The jail cannot widen its own rights beyond the workspace.
	if res := mustRun(t, sh, "touch /workspace/../escape"); res.ExitCode == 0 {
		t.Error("the jail wrote above its workspace")
	}
}
