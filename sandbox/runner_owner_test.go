package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// The file tools replace a file from the jail's runner, which runs as the
// jail's uid. A file that belongs to someone else (root's checkout shared
// with the jail through an ACL, a group-writable file of another user)
// keeps its owner, group, mode and ACL: the runner cannot hand a new file
// to another uid, so it rewrites such a file in place.

// newOwnedShell is newTestShell on a workspace that belongs to uid:gid,
// the uid its jail then runs as.
func newOwnedShell(t *testing.T, uid, gid int) (*Shell, string) {
	t.Helper()
	dir := testWorkspace(t)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	sh, err := NewShell(DefaultProfile(dir), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	return sh, dir
}

// needRoot fails a test that must chown files to other uids.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test hands files to other uids: run it as root (CI does)")
	}
}

func ownerOf(t *testing.T, p string) (uid, gid uint32, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid, fi.Mode()
}

func runnerOf(t *testing.T, sh *Shell) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := sh.Runner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeThrough(t *testing.T, c *client.Conn, path, data string) proto.FileWriteResult {
	t.Helper()
	var res proto.FileWriteResult
	if err := c.Call(context.Background(), proto.OpFileWrite, proto.FileWriteArgs{Path: path, MaxGrow: -1}, []byte(data), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func editThrough(t *testing.T, c *client.Conn, path, old, repl string) proto.FileEditResult {
	t.Helper()
	var res proto.FileEditResult
	args := proto.FileEditArgs{Path: path, OldLen: len(old), Limit: 1 << 20, MaxGrow: -1}
	if err := c.Call(context.Background(), proto.OpFileEdit, args, []byte(old+repl), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// A root server's jail runs as nobody on a root-owned workspace, shared
// with it through ACLs; a group-writable file of another uid in a
// workspace the jail's uid owns. Both are replaced by write_file and
// edit_file, and both keep who owns them.
func TestReplacedFileKeepsItsOwner(t *testing.T) {
	needRoot(t)
	t.Run("root's file shared through an ACL", func(t *testing.T) {
		sh, dir := newTestShell(t) // root-owned: the jail runs as 65534 with an ACL grant
		p := filepath.Join(dir, "root.txt")
		if err := os.WriteFile(p, []byte("root's line\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c := runnerOf(t, sh)
		acl := make([]byte, 256)
		n, err := unix.Getxattr(p, "system.posix_acl_access", acl)
		if err != nil {
			t.Fatalf("the workspace's file has no ACL for the jail: %v", err)
		}
		acl = acl[:n]
		_, _, was := ownerOf(t, p)
		if res := writeThrough(t, c, "root.txt", "the jail's line\n"); res.Fault != nil {
			t.Fatalf("write: %+v", res.Fault)
		}
		if res := editThrough(t, c, "root.txt", "jail's", "agent's"); res.Fault != nil || res.Replaced != 1 {
			t.Fatalf("edit: %+v", res)
		}
		if b, _ := os.ReadFile(p); string(b) != "the agent's line\n" {
			t.Fatalf("content %q", b)
		}
		if uid, gid, mode := ownerOf(t, p); uid != 0 || gid != 0 || mode != was {
			t.Fatalf("root.txt is now owned by %d:%d (mode %v), want 0:0 (mode %v) as before", uid, gid, mode, was)
		}
		got := make([]byte, 256)
		if n, err := unix.Getxattr(p, "system.posix_acl_access", got); err != nil || string(got[:n]) != string(acl) {
			t.Fatalf("the ACL changed: %x, %v; was %x", got[:n], err, acl)
		}
	})
	t.Run("another user's group-writable file", func(t *testing.T) {
		sh, dir := newOwnedShell(t, 4242, 4242) // the jail runs as 4242
		p := filepath.Join(dir, "shared.txt")
		if err := os.WriteFile(p, []byte("v1\n"), 0o664); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 4343, 4242); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o664); err != nil {
			t.Fatal(err)
		}
		c := runnerOf(t, sh)
		if res := writeThrough(t, c, "shared.txt", "v2, written by the jail\n"); res.Fault != nil {
			t.Fatalf("write: %+v", res.Fault)
		}
		if b, _ := os.ReadFile(p); string(b) != "v2, written by the jail\n" {
			t.Fatalf("content %q", b)
		}
		if uid, gid, mode := ownerOf(t, p); uid != 4343 || gid != 4242 || mode.Perm() != 0o664 {
			t.Fatalf("shared.txt is now %d:%d %v, want 4343:4242 -rw-rw-r--", uid, gid, mode)
		}
		// The jail's own file in a group the jail is not in keeps its
		// group.
		grp := filepath.Join(dir, "group.txt")
		if err := os.WriteFile(grp, []byte("v1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(grp, 4242, 4343); err != nil {
			t.Fatal(err)
		}
		if res := writeThrough(t, c, "group.txt", "v2\n"); res.Fault != nil {
			t.Fatalf("write group.txt: %+v", res.Fault)
		}
		if uid, gid, _ := ownerOf(t, grp); uid != 4242 || gid != 4343 {
			t.Fatalf("group.txt is now %d:%d, want 4242:4343", uid, gid)
		}
		// The jail's own file is still replaced atomically, by rename: a
		// new inode.
		own := filepath.Join(dir, "own.txt")
		if res := writeThrough(t, c, "own.txt", "one\n"); res.Fault != nil {
			t.Fatalf("write own: %+v", res.Fault)
		}
		fi, _ := os.Stat(own)
		ino := fi.Sys().(*syscall.Stat_t).Ino
		writeThrough(t, c, "own.txt", "two\n")
		if fi, _ := os.Stat(own); fi.Sys().(*syscall.Stat_t).Ino == ino {
			t.Error("the jail's own file was rewritten in place, not replaced")
		}
		if uid, _, _ := ownerOf(t, own); uid != 4242 {
			t.Errorf("own.txt belongs to %d, want the jail's 4242", uid)
		}
		leftovers(t, dir)
	})
}

// A file of another uid that the jail may not write is refused, as the
// jail's own 'echo > file' would be, and says why: it is not replaced by
// a file of the jail's.
func TestReplacingAnotherUsersReadOnlyFileIsRefused(t *testing.T) {
	needRoot(t)
	sh, dir := newOwnedShell(t, 4242, 4242)
	p := filepath.Join(dir, "theirs.txt")
	if err := os.WriteFile(p, []byte("theirs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 4343, 4343); err != nil {
		t.Fatal(err)
	}
	res := writeThrough(t, runnerOf(t, sh), "theirs.txt", "mine\n")
	if res.Fault == nil || res.Fault.Kind != proto.FaultPermission || !strings.Contains(res.Fault.Message, "belongs to another user") {
		t.Fatalf("write over another uid's read-only file: %+v", res.Fault)
	}
	if b, _ := os.ReadFile(p); string(b) != "theirs\n" {
		t.Fatalf("content %q", b)
	}
	if uid, _, _ := ownerOf(t, p); uid != 4343 {
		t.Fatalf("owner %d", uid)
	}
	leftovers(t, dir)
}

// A rewrite in place that fails half way (here: past the runner's limit
// on file sizes) puts the old content back: the file is never left half
// written, and no copy is left behind.
func TestFailedInPlaceWriteKeepsTheOldContent(t *testing.T) {
	needRoot(t)
	sh, dir := newOwnedShell(t, 4242, 4242)
	p := filepath.Join(dir, "shared.txt")
	old := strings.Repeat("old line\n", 2000) // 18 KB
	if err := os.WriteFile(p, []byte(old), 0o664); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 4343, 4242); err != nil {
		t.Fatal(err)
	}
	// The jail, and so its runner, may write files of at most 64 KiB: a
	// limit the jail inherits from this process while it starts.
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	small := lim
	small.Cur = 64 << 10
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &small); err != nil {
		t.Fatal(err)
	}
	c := runnerOf(t, sh)
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	res := writeThrough(t, c, "shared.txt", strings.Repeat("new line\n", 20000)) // 180 KB
	if res.Fault == nil || !strings.Contains(res.Fault.Message, "shared.txt") {
		t.Fatalf("a write past the file size limit: %+v", res)
	}
	if b, _ := os.ReadFile(p); string(b) != old {
		t.Fatalf("the old content was lost: %d bytes, starting %q", len(b), b[:min(len(b), 40)])
	}
	if uid, gid, _ := ownerOf(t, p); uid != 4343 || gid != 4242 {
		t.Fatalf("owner %d:%d", uid, gid)
	}
	leftovers(t, dir)
}

// leftovers fails when a temporary file or a copy is left in dir.
func leftovers(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".warren-") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}
