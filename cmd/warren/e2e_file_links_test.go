package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFileToolsFollowLinksThatStayInTheWorkspace: the file tools treat a
// symbolic link as the shell does as long as it stays in the workspace
// (write the target, keep the link and the target's mode), read absolute
// links to /workspace/... as the jail means them, and refuse, naming the
// link, any link that leaves the workspace, without touching it.
func TestFileToolsFollowLinksThatStayInTheWorkspace(t *testing.T) {
	needJail(t)
	ws, outside := jailDir(t), jailDir(t)
	decoy := filepath.Join(outside, "decoy")
	mustWrite(t, decoy, "secret\n", 0o600)
	mustWrite(t, filepath.Join(ws, "real.txt"), "old\n", 0o600)
	up, err := filepath.Rel(ws, decoy)
	if err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"link":     "real.txt",
		"abs":      "/workspace/real.txt",
		"dirlink":  "/workspace/sub",
		"dangling": "new/made.txt",
		"out":      decoy,
		"up":       up,
		"etc":      "/etc/passwd",
		"root":     "/workspace/..",
		"loop":     "loop",
	} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	user := serveStdio(t, "--workspace", ws, "--data-dir", jailDir(t))
	// The first call starts the jail, which shares the tree with its uid
	// (an ACL, when the server is root): the mode as the jail left it is
	// the one writes must keep.
	user.ok("read_file", map[string]any{"path": "real.txt"})
	before, err := os.Lstat(filepath.Join(ws, "real.txt"))
	if err != nil {
		t.Fatal(err)
	}

	w := user.ok("write_file", map[string]any{"path": "link", "content": "one\n"})
	if w["path"] != "/workspace/real.txt" {
		t.Errorf("write_file through a link reports %v, want the target it wrote", w["path"])
	}
	user.ok("write_file", map[string]any{"path": "/workspace/abs", "content": "two\n", "append": true})
	user.ok("edit_file", map[string]any{"path": "abs", "old_text": "two", "new_text": "TWO"})
	for _, p := range []string{"link", "abs", "real.txt"} {
		if got := user.ok("read_file", map[string]any{"path": p}); got["content"] != "one\nTWO\n" {
			t.Errorf("read_file %s: %v", p, got)
		}
	}
	fi, err := os.Lstat(filepath.Join(ws, "real.txt"))
	if err != nil || fi.Mode() != before.Mode() || before.Mode().Perm()&0o707 != 0o600 {
		t.Errorf("real.txt after writes through links: %v %v, want a regular file of mode %v as before", fi.Mode(), err, before.Mode())
	}
	for _, l := range []string{"link", "abs"} {
		if fi, err := os.Lstat(filepath.Join(ws, l)); err != nil || fi.Mode().Type() != fs.ModeSymlink {
			t.Errorf("%s is no longer a symbolic link: %v %v", l, fi.Mode(), err)
		}
	}
	user.ok("write_file", map[string]any{"path": "dirlink/x.txt", "content": "x"})
	user.ok("write_file", map[string]any{"path": "dangling", "content": "made"})
	for p, want := range map[string]string{"sub/x.txt": "x", "new/made.txt": "made"} {
		if b, err := os.ReadFile(filepath.Join(ws, p)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v, want %q", p, b, err, want)
		}
	}

	for _, l := range []string{"out", "up", "etc", "root", "/workspace/out", "dirlink/../up"} {
		user.fails("write_file", map[string]any{"path": l, "content": "pwned"}, "outside the workspace")
		user.fails("write_file", map[string]any{"path": l, "content": "pwned", "append": true}, "outside the workspace")
		user.fails("edit_file", map[string]any{"path": l, "old_text": "secret", "new_text": "pwned"}, "outside the workspace")
		user.fails("read_file", map[string]any{"path": l}, "outside the workspace")
	}
	user.fails("write_file", map[string]any{"path": "out", "content": "x"}, "/workspace/out is a symbolic link to "+decoy)
	user.fails("write_file", map[string]any{"path": "root/x", "content": "x"}, "outside the workspace")
	user.fails("write_file", map[string]any{"path": "loop", "content": "x"}, "too many symbolic links")
	for _, l := range []string{"out", "up", "etc", "root"} {
		if fi, err := os.Lstat(filepath.Join(ws, l)); err != nil || fi.Mode().Type() != fs.ModeSymlink {
			t.Errorf("refused link %s was replaced: %v %v", l, fi.Mode(), err)
		}
	}
	checkDecoy(t, decoy, outside)
}

// TestFileToolsRaceLinkSwaps plays a jail that swaps, as fast as it can, the
// file the tools write for a symbolic link to a decoy outside the workspace
// (absolute and relative), and a directory on the path for a link to the
// decoy's directory, while write_file and edit_file run. The decoy never
// changes, nothing appears outside, and no file of the workspace ends up
// world-writable (a write that took the link's own mode, 0777).
func TestFileToolsRaceLinkSwaps(t *testing.T) {
	needJail(t)
	ws, outside := jailDir(t), jailDir(t)
	decoy := filepath.Join(outside, "decoy")
	mustWrite(t, decoy, "secret\n", 0o600)
	up, err := filepath.Rel(ws, decoy)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(ws, "target"), "inside\n", 0o644)
	must(t, os.Symlink(decoy, filepath.Join(ws, "abslink")))
	must(t, os.Symlink(up, filepath.Join(ws, "rellink")))
	must(t, os.Mkdir(filepath.Join(ws, "d"), 0o755))
	must(t, os.Symlink(outside, filepath.Join(ws, "dirlink")))
	user := serveStdio(t, "--workspace", ws, "--data-dir", jailDir(t))

	var stop atomic.Bool
	var wg sync.WaitGroup
	var swaps atomic.Int64
	for _, pair := range [][2]string{{"target", "abslink"}, {"target", "rellink"}, {"d", "dirlink"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, b := filepath.Join(ws, pair[0]), filepath.Join(ws, pair[1])
			for !stop.Load() {
				if unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE) == nil {
					swaps.Add(1)
				}
			}
		}()
	}
	var ok, refused int
	for i := range 80 {
		for _, call := range []struct {
			tool string
			args map[string]any
		}{
			{"write_file", map[string]any{"path": "target", "content": "w\n"}},
			{"write_file", map[string]any{"path": "target", "content": "a\n", "append": i%2 == 0}},
			{"edit_file", map[string]any{"path": "target", "old_text": "\n", "new_text": "e\n", "replace_all": true}},
			{"write_file", map[string]any{"path": "d/new.txt", "content": "n\n"}},
		} {
			if user.call(call.tool, call.args).IsError {
				refused++
			} else {
				ok++
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d calls succeeded, %d refused, %d swaps", ok, refused, swaps.Load())
	checkDecoy(t, decoy, outside)
	filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o002 != 0 {
			t.Errorf("%s is world-writable (%v): a write took a symbolic link's mode", p, fi.Mode())
		}
		return nil
	})
}

// checkDecoy fails the test if the decoy changed or anything else appeared
// in its directory.
func checkDecoy(t *testing.T, decoy, dir string) {
	t.Helper()
	b, err := os.ReadFile(decoy)
	if err != nil || string(b) != "secret\n" {
		t.Errorf("decoy content changed: %q %v", b, err)
	}
	if fi, err := os.Lstat(decoy); err != nil || fi.Mode() != 0o600 {
		t.Errorf("decoy mode changed: %v %v", fi.Mode(), err)
	}
	if _, err := unix.Lgetxattr(decoy, "system.posix_acl_access", make([]byte, 256)); err != unix.ENODATA {
		t.Errorf("decoy has an ACL now (%v)", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("something was created beside the decoy: %v", entries)
	}
}

func mustWrite(t *testing.T, p, content string, mode fs.FileMode) {
	t.Helper()
	must(t, os.WriteFile(p, []byte(content), mode))
	must(t, os.Chmod(p, mode))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestWriteFileRaceNewDirectorySwap plays a jail that exchanges each
// directory write_file creates with a file owned by root: the server, which
// hands new directories to the jail's uid, must never chown that file.
func TestWriteFileRaceNewDirectorySwap(t *testing.T) {
	needJail(t)
	if os.Geteuid() != 0 {
		t.Skip("only a root server hands new directories to another uid")
	}
	ws := jailDir(t)
	rootFile := filepath.Join(ws, "rootfile")
	mustWrite(t, rootFile, "root's\n", 0o644)
	user := serveStdio(t, "--workspace", ws, "--data-dir", jailDir(t))
	user.ok("write_file", map[string]any{"path": "warmup", "content": "x"})

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			unix.Renameat2(unix.AT_FDCWD, rootFile, unix.AT_FDCWD, filepath.Join(ws, "nd"), unix.RENAME_EXCHANGE)
		}
	}()
	go func() {
		defer wg.Done()
		nd := filepath.Join(ws, "nd")
		for !stop.Load() { // make write_file create nd again; never remove the file
			unix.Unlinkat(unix.AT_FDCWD, filepath.Join(nd, "x"), 0)
			unix.Rmdir(nd)
		}
	}()
	given := func() bool { // root's file belongs to someone else now
		for _, p := range []string{rootFile, filepath.Join(ws, "nd")} {
			var st unix.Stat_t
			if unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Uid != 0 {
				return true
			}
		}
		return false
	}
	for i := 0; i < 800 && !given(); i++ {
		user.call("write_file", map[string]any{"path": "nd/x", "content": "x"})
	}
	stop.Store(true)
	wg.Wait()
	found := false
	for _, p := range []string{rootFile, filepath.Join(ws, "nd")} {
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		found = true
		if st.Uid != 0 {
			t.Errorf("%s, a file of root's, now belongs to uid %d", p, st.Uid)
		}
	}
	if !found {
		t.Fatal("root's file disappeared: the test lost track of it")
	}
}
