package sessions

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A copy takes the session's current files, uncommitted ones included,
// links as links; the two sessions are independent afterwards; nobody
// copies another user's session.
func TestCopyOfASessionTakesItsCurrentState(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data})
	src, err := m.Create(ctx, "alice", CreateOptions{Name: "first try"})
	if err != nil {
		t.Fatal(err)
	}
	write(t, src.Workspace, "notes/plan.md", "step one\n")
	write(t, src.Workspace, "run.sh", "#!/bin/sh\necho hi\n")
	os.Chmod(filepath.Join(src.Workspace, "run.sh"), 0o755)
	os.Symlink("/etc/passwd", filepath.Join(src.Workspace, "abs-link"))
	os.Symlink("notes/plan.md", filepath.Join(src.Workspace, "rel-link"))

	cp, err := m.Create(ctx, "alice", CreateOptions{CopyOf: src.ID, Name: "second try"})
	if err != nil {
		t.Fatal(err)
	}
	if cp.ID == src.ID || cp.Workspace == src.Workspace || cp.Mode != ModeCopy || cp.Source != "session "+src.ID {
		t.Fatalf("copy %+v", cp.Info())
	}
	if b, _ := os.ReadFile(filepath.Join(cp.Workspace, "notes/plan.md")); string(b) != "step one\n" {
		t.Errorf("plan.md in the copy: %q", b)
	}
	if st, err := os.Stat(filepath.Join(cp.Workspace, "run.sh")); err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Errorf("run.sh in the copy: %v %v, want executable", st, err)
	}
	for link, want := range map[string]string{"abs-link": "/etc/passwd", "rel-link": "notes/plan.md"} {
		if got, err := os.Readlink(filepath.Join(cp.Workspace, link)); err != nil || got != want {
			t.Errorf("%s in the copy: %q %v, want a link to %s", link, got, err, want)
		}
	}
	// Independent: the copy changes, the source does not.
	write(t, cp.Workspace, "notes/plan.md", "another approach\n")
	if b, _ := os.ReadFile(filepath.Join(src.Workspace, "notes/plan.md")); string(b) != "step one\n" {
		t.Errorf("the source changed with its copy: %q", b)
	}
	_, d, err := m.Diff(ctx, "alice", cp.ID, 0)
	if err != nil || !strings.Contains(d.Patch, "another approach") {
		t.Errorf("the copy's diff against its start: %v %+v", err, d)
	}

	if _, err := m.Create(ctx, "bob", CreateOptions{CopyOf: src.ID}); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob copied alice's session: %v", err)
	}
	if _, err := m.Create(ctx, "alice", CreateOptions{CopyOf: src.ID, Source: "https://example.com/x.git"}); err == nil {
		t.Error("copy_of with a source was accepted")
	}
}

// The jail swaps a directory and a file for symlinks to a decoy outside
// the workspace, over and over, while sessions are copied: the decoy's
// content never appears in a copy, and the decoy is left as it was.
func TestCopyNeverFollowsASwappedSymlink(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data})
	src, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	decoy := t.TempDir()
	write(t, decoy, "f", "DECOY-SECRET\n")
	write(t, decoy, "x", "DECOY-SECRET\n")
	os.Chmod(filepath.Join(decoy, "f"), 0o600)
	ws := src.Workspace
	write(t, ws, "d/f", "inside\n")
	write(t, ws, "x", "inside\n")
	for i := range 20 {
		write(t, ws, filepath.Join("more", string(rune('a'+i))), "filler\n")
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the jail
		defer wg.Done()
		d, x := filepath.Join(ws, "d"), filepath.Join(ws, "x")
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.Rename(d, d+".away")
			_ = os.Symlink(decoy, d)
			_ = os.Rename(x, x+".away")
			_ = os.Symlink(filepath.Join(decoy, "x"), x)
			_ = os.Remove(d)
			_ = os.Rename(d+".away", d)
			_ = os.Remove(x)
			_ = os.Rename(x+".away", x)
		}
	}()
	copies, refused := 0, 0
	deadline := time.Now().Add(3 * time.Second)
	var leak string
	for time.Now().Before(deadline) && leak == "" {
		cp, err := m.Create(ctx, "alice", CreateOptions{CopyOf: src.ID})
		if err != nil {
			refused++ // "kept changing while being read": refused, not wrong
			continue
		}
		copies++
		filepath.WalkDir(cp.Workspace, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				if b, _ := os.ReadFile(p); strings.Contains(string(b), "DECOY") {
					leak = p
				}
			}
			return nil
		})
		m.Delete(ctx, "alice", cp.ID)
	}
	close(stop)
	wg.Wait()
	if leak != "" {
		t.Fatalf("copy %d holds the decoy's content at %s", copies, leak)
	}
	if copies < 5 {
		t.Fatalf("only %d copies raced the swaps (%d refused)", copies, refused)
	}
	if st, _ := os.Stat(filepath.Join(decoy, "f")); st.Mode().Perm() != 0o600 {
		t.Errorf("the decoy's mode changed: %v", st.Mode())
	}
	t.Logf("%d copies, %d refused while the jail raced", copies, refused)
}

// A copy that could not be whole is refused, and leaves nothing behind.
func TestCopyOverTheQuotaIsRefused(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, QuotaBytes: 1 << 20})
	src, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src.Workspace, "big.bin"), make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(filepath.Join(data, "workspaces"))
	_, err = m.Create(ctx, "alice", CreateOptions{CopyOf: src.ID})
	if err == nil || !strings.Contains(err.Error(), "cannot be copied whole") {
		t.Fatalf("copy of a workspace over the quota: %v", err)
	}
	after, _ := os.ReadDir(filepath.Join(data, "workspaces"))
	if len(after) != len(before) {
		t.Errorf("the refused copy left a workspace behind")
	}
	if left, _ := filepath.Glob(filepath.Join(data, ".copy-*")); len(left) > 0 {
		t.Errorf("scratch left behind: %v", left)
	}
}
