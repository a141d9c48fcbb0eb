package sessions

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// boundSession binds a fresh directory holding note.txt ("mine") and
// returns the manager, the session and the bound path; the directory's
// parent is where a host user can swap links.
func boundSession(t *testing.T) (m *Manager, s *Session, data, bound string) {
	t.Helper()
	data = jailData(t)
	parent := jailData(t)
	bound = filepath.Join(parent, "ws")
	if err := os.Mkdir(bound, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bound, "note.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	m = newManager(t, openDB(t, data), Config{DataDir: data, AllowLocalSources: true})
	t.Cleanup(func() { m.Close(context.Background()) })
	s, err := m.Create(context.Background(), "alice", CreateOptions{Source: bound, Mode: ModeBind})
	if err != nil {
		t.Fatal(err)
	}
	if s.Workspace != bound {
		t.Fatalf("stored workspace %s, want %s", s.Workspace, bound)
	}
	return m, s, data, bound
}

// swapLink atomically makes path a symbolic link to target.
func swapLink(t testing.TB, path, target string) {
	tmp := path + ".swap"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Error(err)
	}
}

// TestASwappedBindIsRefusedWhileItsShellRuns: while the session's shell
// runs, a host user makes the bound path lead to a system directory, or
// moves the bound directory itself into the data directory (the same
// directory, in a place no session may be) and links the path to it. The
// next command (which could start a jail on the path), every file tool, the
// diff and a copy of the session refuse it; put back, the session works
// again.
func TestASwappedBindIsRefusedWhileItsShellRuns(t *testing.T) {
	ctx := context.Background()
	m, s, data, bound := boundSession(t)
	for _, tc := range []struct {
		name, want string
		swap       func(moved string) // moved: where the directory goes
	}{
		{"a link to /usr/share", "system directory", func(string) { swapLink(t, bound, "/usr/share") }},
		{"moved into the data directory", "data directory", func(moved string) {
			if err := os.Rename(moved, filepath.Join(data, "ws")); err != nil {
				t.Fatal(err)
			}
			swapLink(t, bound, filepath.Join(data, "ws"))
		}},
	} {
		if res := run(t, m, "alice", s.ID, "cat note.txt"); string(res.Stdout) != "mine" {
			t.Fatalf("cat note.txt: %q", res.Stdout)
		}
		if !m.Running(s.ID) {
			t.Fatal("the shell does not run after a command")
		}
		moved := bound + "-moved"
		if err := os.Rename(bound, moved); err != nil {
			t.Fatal(err)
		}
		tc.swap(moved)
		for range 3 { // a refusal is not remembered as a pass, nor a pass as one
			if _, _, err := m.openCommand(ctx, "alice", s.ID, "ls"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: a command: %v, want a refusal naming the %s", tc.name, err, tc.want)
			}
			for _, write := range []bool{false, true} {
				if _, _, err := m.OpenFiles(ctx, "alice", s.ID, write); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: file tools (write %v): %v, want a refusal", tc.name, write, err)
				}
			}
			if _, _, err := m.Diff(ctx, "alice", s.ID, 1<<20); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: diff: %v, want a refusal", tc.name, err)
			}
		}
		if c, err := m.Create(ctx, "alice", CreateOptions{CopyOf: s.ID}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: a copy of the session: %v, want a refusal", tc.name, err)
			if err == nil {
				m.Delete(ctx, "alice", c.ID)
			}
		}
		if err := os.Remove(bound); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(moved); err != nil {
			moved = filepath.Join(data, "ws")
		}
		if err := os.Rename(moved, bound); err != nil {
			t.Fatal(err)
		}
	}
	if res := run(t, m, "alice", s.ID, "cat note.txt"); string(res.Stdout) != "mine" {
		t.Fatalf("cat note.txt once the directory is back: %q", res.Stdout)
	}
}

// TestAFlippingLinkNeverOpensAnotherDirectory: a host user flips the bound
// path between a link to the real directory and a link into the data
// directory (refused: it holds other sessions) as fast as it can, while
// the file tools open the session's workspace. Whatever the timing, a read
// either is refused or reads the bound directory: the decoy's content
// never comes back.
func TestAFlippingLinkNeverOpensAnotherDirectory(t *testing.T) {
	ctx := context.Background()
	m, s, _, stop := flippingBind(t)
	var read, refused atomic.Int64
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) || read.Load() == 0 || refused.Load() == 0 {
		_, f, err := m.OpenFiles(ctx, "alice", s.ID, false)
		if err != nil {
			refused.Add(1)
			continue
		}
		if c, err := f.Read(ctx, "note.txt", 1<<10); err == nil {
			read.Add(1)
			if string(c.Data) != "mine" {
				t.Errorf("read %q through the session's file tools, want the bound directory's %q", c.Data, "mine")
			}
		}
		if t.Failed() {
			break
		}
	}
	stop()
	t.Logf("%d reads, %d refusals", read.Load(), refused.Load())
}

// TestAFlippingLinkNeverReachesTheAudit: the same flipping link while the
// session's diff snapshots its workspace: the diff either is refused or
// shows the bound directory; the decoy's content never enters the audit
// repository nor comes back in a patch.
func TestAFlippingLinkNeverReachesTheAudit(t *testing.T) {
	ctx := context.Background()
	m, s, secret, stop := flippingBind(t)
	var diffs, refused int
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) || diffs == 0 || refused == 0 {
		_, d, err := m.Diff(ctx, "alice", s.ID, 1<<20)
		if err != nil {
			refused++
			continue
		}
		diffs++
		if strings.Contains(d.Patch, secret) || strings.Contains(fmt.Sprint(d.Files), "decoy") {
			t.Fatalf("the diff shows the decoy: %s", d.Patch)
		}
	}
	stop()
	t.Logf("%d diffs, %d refusals", diffs, refused)
}

// flippingBind gives alice a session bound to a path that a goroutine
// flips, as fast as it can, between a link to the bound directory (which
// holds note.txt "mine") and a link to a decoy in the data directory
// (refused: it holds other sessions) whose note.txt is secret. stop ends
// the flipping with the link on the bound directory.
func flippingBind(t *testing.T) (m *Manager, s *Session, secret string, stop func()) {
	m, s, data, bound := boundSession(t)
	decoy := filepath.Join(data, "decoy")
	if err := os.Mkdir(decoy, 0o755); err != nil {
		t.Fatal(err)
	}
	secret = "decoy-" + NewID()
	if err := os.WriteFile(filepath.Join(decoy, "note.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	real := bound + "-real"
	if err := os.Rename(bound, real); err != nil {
		t.Fatal(err)
	}
	swapLink(t, bound, real)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				swapLink(t, bound, real)
				return
			default:
			}
			if i%2 == 0 {
				swapLink(t, bound, decoy)
			} else {
				swapLink(t, bound, real)
			}
		}
	})
	return m, s, secret, func() { close(done); wg.Wait() }
}

// TestAMovedParentIsCheckedAgain: the bound directory stays the same
// inode, unchanged, but the directory holding it is moved into the data
// directory and a link left in its place, so the stored path now leads
// into the data directory. The cached check must not hold: the directory
// is somewhere else now, and every use is refused.
func TestAMovedParentIsCheckedAgain(t *testing.T) {
	ctx := context.Background()
	m, s, data, bound := boundSession(t)
	if _, _, err := m.OpenFiles(ctx, "alice", s.ID, false); err != nil {
		t.Fatalf("before the move: %v", err)
	}
	parent := filepath.Dir(bound)
	moved := filepath.Join(data, "moved-parent")
	if err := os.Rename(parent, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, parent); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.OpenFiles(ctx, "alice", s.ID, false); err == nil {
		t.Fatal("the file tools opened a workspace that now lies inside the data directory")
	}
	if _, _, err := m.open(ctx, "alice", s.ID); err == nil {
		t.Fatal("a command may run in a workspace that now lies inside the data directory")
	}
}
