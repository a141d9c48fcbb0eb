package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// TestJailsBindTheDirectoryTheShellWasGiven: the workspace a jail sees is
// the directory the shell was made with, opened once, not whatever its
// path names when a jail starts: a path swapped for a link to another
// directory (by someone who can write its parent) between the check and
// a later jail start, or a restart, must not hand that directory to the
// jail.
func TestJailsBindTheDirectoryTheShellWasGiven(t *testing.T) {
	parent := testWorkspace(t)
	ws := filepath.Join(parent, "ws")
	decoy := filepath.Join(parent, "decoy")
	for _, d := range []string{ws, decoy} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "mine.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(decoy, "secret.txt"), []byte("decoy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh, err := NewShell(DefaultProfile(ws), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })

	// Swap before the first jail starts, then again before a restart.
	if err := os.Rename(ws, ws+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(decoy, ws); err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"first start", "after a restart"} {
		res := mustRun(t, sh, "cat /workspace/*.txt; touch /workspace/made-by-jail")
		if got := string(res.Stdout); got != "mine\n" {
			t.Fatalf("%s: the jail sees %q in /workspace, want only the shell's own directory (mine)", step, got)
		}
		sh.Stop()
	}
	if _, err := os.Stat(filepath.Join(decoy, "made-by-jail")); err == nil {
		t.Fatal("the jail wrote into the directory the path was swapped to")
	}
	if entries, _ := os.ReadDir(decoy); len(entries) != 1 {
		t.Fatalf("decoy directory changed: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(ws+".moved", "made-by-jail")); err != nil {
		t.Fatalf("the jail's file is not in the shell's own directory: %v", err)
	}
}
