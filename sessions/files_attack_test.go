package sessions

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFilesThroughTheRunnerRaceLinkSwaps plays a jail that swaps, as fast
// as it can, the file the tools read, write and edit for a link to a
// decoy outside the workspace (its home, /home/warren/decoy: absolute and
// relative), and a directory on a write's path for a link to the home,
// while the server reads, writes and edits through the session's runner.
// Whichever way each race goes, no read returns the decoy's content, the
// decoy keeps its content and inode, and nothing appears beside it.
func TestFilesThroughTheRunnerRaceLinkSwaps(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, QuotaInterval: time.Hour})
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run(t, m, "alice", s.ID, "echo secret > ~/decoy && echo inside > t && mkdir d && "+
		"ln -s /home/warren/decoy abslink && ln -s ../home/warren/decoy rellink && ln -s /home/warren dlink")
	home := m.homeDir(s.ID)
	decoy := filepath.Join(home, "decoy")
	var before unix.Stat_t
	if err := unix.Lstat(decoy, &before); err != nil {
		t.Fatal(err)
	}
	homeBefore, _ := os.ReadDir(home)

	in := func(name string) string { return filepath.Join(s.Workspace, name) }
	var stop atomic.Bool
	var wg sync.WaitGroup
	var swaps atomic.Int64
	for _, pair := range [][2]string{{"t", "abslink"}, {"t", "rellink"}, {"d", "dlink"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if unix.Renameat2(unix.AT_FDCWD, in(pair[0]), unix.AT_FDCWD, in(pair[1]), unix.RENAME_EXCHANGE) == nil {
					swaps.Add(1)
				}
			}
		}()
	}
	_, f, err := m.OpenFiles(ctx, "alice", s.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	var reads, writes, refused int
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); {
		for _, name := range []string{"t", "abslink", "rellink", "dlink/decoy", "d/x"} {
			c, err := f.Read(ctx, name, 1<<10)
			if err == nil {
				reads++
			}
			if strings.Contains(string(c.Data), "secret") {
				t.Fatalf("a read of %s returned the decoy's content", name)
			}
		}
		for _, name := range []string{"t", "d/x", "abslink"} {
			if _, err := f.Write(ctx, name, []byte("pwned\n"), WriteOptions{}); err != nil {
				refused++
			} else {
				writes++
			}
		}
		if _, err := f.Edit(ctx, "t", EditOptions{Old: "e", New: "E", All: true, Limit: 1 << 10}); err == nil {
			writes++
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d reads, %d writes, %d refused, %d swaps", reads, writes, refused, swaps.Load())
	if reads == 0 || writes == 0 {
		t.Fatal("no read or no write succeeded: the test did not exercise them")
	}
	b, err := os.ReadFile(decoy)
	if err != nil || string(b) != "secret\n" {
		t.Errorf("the decoy changed: %q %v", b, err)
	}
	var after unix.Stat_t
	if err := unix.Lstat(decoy, &after); err != nil || after.Ino != before.Ino || after.Mode != before.Mode {
		t.Errorf("the decoy was replaced: inode %d mode %o, was %d %o (%v)", after.Ino, after.Mode, before.Ino, before.Mode, err)
	}
	if homeAfter, _ := os.ReadDir(home); len(homeAfter) != len(homeBefore) {
		t.Errorf("something was created beside the decoy: %v, was %v", homeAfter, homeBefore)
	}
}

// A FIFO, a device and a huge sparse file in the workspace are refused by
// every file tool, and none of them holds the server up: the runner looks
// at what an entry is before it reads a byte.
func TestFilesThroughTheRunnerRefuseSpecialFiles(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, QuotaInterval: time.Hour})
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run(t, m, "alice", s.ID, "mkfifo pipe")
	// Made here: the jail's own file size limit would stop truncate.
	sparse, err := os.Create(filepath.Join(s.Workspace, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sparse.Truncate(100 << 30); err != nil {
		t.Fatal(err)
	}
	sparse.Close()
	// A device node only root can make: the server's test process is root
	// in CI; elsewhere the FIFO and the sparse file still run.
	if os.Geteuid() == 0 {
		if err := unix.Mknod(filepath.Join(s.Workspace, "zero"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
			t.Fatal(err)
		}
	}
	_, f, err := m.OpenFiles(ctx, "alice", s.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	// Only so that a regression fails instead of hanging the test run.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	names := []string{"pipe", "sparse"}
	if os.Geteuid() == 0 {
		names = append(names, "zero")
	}
	for _, name := range names {
		_, rerr := f.Read(ctx, name, 10<<20)
		_, aerr := f.Write(ctx, name, []byte("x"), WriteOptions{Append: true, Limit: 10 << 20})
		_, eerr := f.Edit(ctx, name, EditOptions{Old: "a", New: "b", Limit: 10 << 20})
		for what, err := range map[string]error{"read": rerr, "append": aerr, "edit": eerr} {
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s of %s hung", what, name)
			}
			var fe *FileError
			ok := errors.As(err, &fe) && (errors.Is(err, ErrNotRegular) || errors.Is(err, ErrTooBig) || errors.Is(err, fs.ErrPermission))
			if !ok {
				t.Errorf("%s of %s: %v, want a refusal", what, name, err)
			}
		}
	}
	if _, err := f.Read(ctx, "sparse", 10<<20); !errors.Is(err, ErrTooBig) || !strings.Contains(err.Error(), "sparse is 107374182400 bytes, over the limit") {
		t.Errorf("read of a 100 GB sparse file: %v", err)
	}
}
