package runner

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// TestFileOpsRaceLinkSwaps plays a jail that, while reads and writes run,
// swaps the directory a write goes into for a link to a directory outside
// the workspace, swaps the file a write replaces or a read opens for a
// link to a decoy outside, and turns a directory a write must create into
// such a link and back. Whichever way each race goes, nothing outside may
// be read or changed: the decoy keeps its content, mode and lack of an
// ACL, nothing appears beside it, and no read returns its content.
func TestFileOpsRaceLinkSwaps(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	decoy := filepath.Join(outside, "decoy")
	if err := os.WriteFile(decoy, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var before unix.Stat_t
	if err := unix.Lstat(decoy, &before); err != nil {
		t.Fatal(err)
	}
	in := func(name string) string { return filepath.Join(ws, name) }
	for _, err := range []error{
		os.Mkdir(in("sub"), 0o755),
		os.Symlink(outside, in("sublink")),
		os.WriteFile(in("t"), []byte("inside\n"), 0o644),
		os.Symlink(decoy, in("tlink")),
		os.Symlink("../"+filepath.Base(outside)+"/decoy", in("rlink")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var swaps atomic.Int64
	race := func(step func() bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if step() {
					swaps.Add(1)
				}
			}
		}()
	}
	exchange := func(a, b string) func() bool {
		return func() bool {
			return unix.Renameat2(unix.AT_FDCWD, in(a), unix.AT_FDCWD, in(b), unix.RENAME_EXCHANGE) == nil
		}
	}
	race(exchange("sub", "sublink"))
	race(exchange("t", "tlink"))
	race(exchange("tlink", "rlink"))
	race(func() bool { // "new" is missing, a link out, or a directory a write made
		os.RemoveAll(in("new"))
		if os.Symlink(outside, in("new")) != nil {
			return false
		}
		time.Sleep(10 * time.Microsecond)
		return os.Remove(in("new")) == nil
	})

	c := filesPair(t, ws)
	var ok, refused, reads int
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		for _, name := range []string{"sub/x", "t", "new/deep/x"} {
			res := writeVia(t, c, proto.FileWriteArgs{Path: name, MaxGrow: -1}, "pwned\n")
			if res.Fault != nil {
				refused++
			} else {
				ok++
			}
		}
		for _, name := range []string{"t", "tlink", "rlink", "sub/x", "sub/decoy", "sublink/decoy"} {
			b, res := readVia(t, c, name, 1<<10)
			if res.Fault == nil {
				reads++
			}
			if strings.Contains(string(b), "secret") {
				t.Fatalf("a read of %s returned the decoy's content", name)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d writes, %d refused, %d reads, %d swaps", ok, refused, reads, swaps.Load())
	if ok == 0 || reads == 0 {
		t.Error("no write or no read succeeded: the test did not exercise them")
	}
	b, err := os.ReadFile(decoy)
	if err != nil || string(b) != "secret\n" {
		t.Errorf("decoy content changed: %q %v", b, err)
	}
	var after unix.Stat_t
	if err := unix.Lstat(decoy, &after); err != nil {
		t.Fatal(err)
	}
	if after.Mode != before.Mode || after.Uid != before.Uid || after.Gid != before.Gid || after.Ino != before.Ino {
		t.Errorf("decoy changed: mode %o uid %d gid %d inode %d, was %o %d %d %d",
			after.Mode, after.Uid, after.Gid, after.Ino, before.Mode, before.Uid, before.Gid, before.Ino)
	}
	if _, err := unix.Lgetxattr(decoy, aclXattr, make([]byte, 256)); err != unix.ENODATA {
		t.Errorf("decoy has an ACL now (%v)", err)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("something was created beside the decoy: %v", entries)
	}
}
