package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// decoy is a root-only file or directory outside the workspace that the
// jail points symlinks at. Its mode, owner and ACLs must never change.
type decoy struct {
	path string
	mode os.FileMode
}

func newDecoys(t *testing.T) (file, dir decoy) {
	t.Helper()
	outside := testWorkspace(t)
	file = decoy{filepath.Join(outside, "secret"), 0o600}
	if err := os.WriteFile(file.path, []byte("root only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir = decoy{filepath.Join(outside, "private"), 0o700 | os.ModeDir}
	if err := os.Mkdir(dir.path, 0o700); err != nil {
		t.Fatal(err)
	}
	return file, dir
}

// changed reports how the decoy differs from what it was (empty: intact),
// and puts it back so the next round can be caught too.
func (d decoy) changed() string {
	var why string
	fi, err := os.Lstat(d.path)
	if err != nil {
		return err.Error()
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode() != d.mode {
		why += fmt.Sprintf("mode %v; ", fi.Mode())
	}
	if st.Uid != 0 || st.Gid != 0 {
		why += fmt.Sprintf("owner %d:%d; ", st.Uid, st.Gid)
	}
	for _, attr := range []string{xattrACLAccess, xattrACLDefault} {
		_, err := unix.Getxattr(d.path, attr, make([]byte, 256))
		if !errors.Is(err, unix.ENODATA) {
			why += fmt.Sprintf("%s present (%v); ", attr, err)
			_ = unix.Removexattr(d.path, attr)
		}
	}
	if why != "" {
		_ = os.Chown(d.path, 0, 0)
		_ = os.Chmod(d.path, d.mode.Perm())
	}
	return why
}

// swapper stands in for a jail sharing the workspace: it keeps exchanging
// (renameat2 RENAME_EXCHANGE, one atomic step) a real file with a symlink
// to the decoy file, and a real directory with a symlink to the decoy
// directory, as fast as it can, in several slots so that every walk meets
// many of them.
func swapper(t *testing.T, ws string, file, dir decoy, stop <-chan struct{}) *sync.WaitGroup {
	t.Helper()
	var pairs [][2]string
	for i := 0; i < 16; i++ {
		slot := filepath.Join(ws, fmt.Sprintf("slot%02d", i))
		if err := os.MkdirAll(filepath.Join(slot, "d"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(slot, "d", "inner"), nil, 0o644)
		os.WriteFile(filepath.Join(slot, "f"), nil, 0o644)
		os.Symlink(file.path, filepath.Join(slot, "f.link"))
		os.Symlink(dir.path, filepath.Join(slot, "d.link"))
		pairs = append(pairs, [2]string{filepath.Join(slot, "f"), filepath.Join(slot, "f.link")},
			[2]string{filepath.Join(slot, "d"), filepath.Join(slot, "d.link")})
	}
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, p := range pairs {
					_ = unix.Renameat2(unix.AT_FDCWD, p[0], unix.AT_FDCWD, p[1], unix.RENAME_EXCHANGE)
				}
			}
		}()
	}
	return &wg
}

// TestTreeWalksNeverFollowSwappedSymlinks is issue 9 item 3: a jail that
// shares its workspace races renames between files and symlinks to
// root-only files outside, and between directories and symlinks to
// directories outside, while the server grants the workspace to the jail's
// uid (as when another shell starts on it) or hands it over with chown.
// Nothing outside may change.
func TestTreeWalksNeverFollowSwappedSymlinks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the server hands workspaces to another uid only when it runs as root")
	}
	walks := map[string]func(ws string) error{
		"grantTree": func(ws string) error { return walkTree(ws, func(r *treeRoot) error { return grantTree(r, 65534) }) },
		"chownTree": func(ws string) error {
			return walkTree(ws, func(r *treeRoot) error { return chownTree(r, 65534, 65534) })
		},
	}
	for name, walk := range walks {
		t.Run(name, func(t *testing.T) {
			ws := testWorkspace(t)
			for i := 0; i < 50; i++ { // some ordinary files, so a walk takes a while
				os.WriteFile(filepath.Join(ws, fmt.Sprintf("file%03d", i)), nil, 0o644)
			}
			file, dir := newDecoys(t)
			inner := decoy{filepath.Join(dir.path, "inner"), 0o600}
			os.WriteFile(inner.path, nil, 0o600)
			stop := make(chan struct{})
			wg := swapper(t, ws, file, dir, stop)
			var won atomic.Int64
			var report []string
			for round := 0; round < 150; round++ {
				if err := walk(ws); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Logf("round %d: %v", round, err) // a walk may fail; it must not follow
				}
				for _, d := range []decoy{file, dir, inner} {
					if why := d.changed(); why != "" {
						won.Add(1)
						if len(report) < 5 {
							report = append(report, d.path+": "+why)
						}
					}
				}
			}
			close(stop)
			wg.Wait()
			if n := won.Load(); n > 0 {
				t.Errorf("the jail won the race %d times in 150 walks; first: %q", n, report)
			}
		})
	}
}

// TestSystemDirDecidesOnTheResolvedPath is issue 9 item 2, second line of
// defence: a path into a system tree through a symlink (rootlink -> /, in
// a workspace the jail controls) is a system directory.
func TestSystemDirDecidesOnTheResolvedPath(t *testing.T) {
	ws := testWorkspace(t)
	if err := os.Symlink("/", filepath.Join(ws, "rootlink")); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(ws, "mine"), 0o755)
	for path, want := range map[string]bool{
		filepath.Join(ws, "rootlink", "usr", "share"): true,
		filepath.Join(ws, "rootlink", "etc"):          true,
		filepath.Join(ws, "rootlink"):                 true,
		filepath.Join(ws, "rootlink", "nonexistent"):  true, // cannot be resolved: refused
		filepath.Join(ws, "mine"):                     false,
		"/usr/share":                                  true,
	} {
		if got := systemDir(path); got != want {
			t.Errorf("systemDir(%s) = %v, want %v", path, got, want)
		}
	}
}

// TestGrantTreeTouchesOnlyFilesAndDirectoriesOfItsMount: a FIFO, a socket
// or a device is never the jail's to be given, and a file system mounted
// inside the workspace is someone else's.
func TestGrantTreeTouchesOnlyFilesAndDirectoriesOfItsMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a file system inside the workspace needs root")
	}
	ws := testWorkspace(t)
	os.WriteFile(filepath.Join(ws, "plain"), nil, 0o644)
	if err := unix.Mkfifo(filepath.Join(ws, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(ws, "mnt")
	os.Mkdir(mnt, 0o755)
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	os.WriteFile(filepath.Join(mnt, "theirs"), nil, 0o600)
	if err := walkTree(ws, func(r *treeRoot) error { return grantTree(r, 65534) }); err != nil {
		t.Fatal(err)
	}
	hasACL := func(p string) bool {
		_, err := unix.Lgetxattr(p, xattrACLAccess, make([]byte, 256))
		return err == nil
	}
	if !hasACL(filepath.Join(ws, "plain")) {
		t.Error("the regular file was not granted")
	}
	for _, p := range []string{"fifo", "mnt", "mnt/theirs"} {
		if hasACL(filepath.Join(ws, p)) {
			t.Errorf("%s was granted", p)
		}
	}
}

// walkTree opens dir as the server opens a workspace or a home and runs one
// of the tree walks on it.
func walkTree(dir string, walk func(*treeRoot) error) error {
	root, err := openTree(dir)
	if err != nil {
		return err
	}
	defer root.close()
	return walk(root)
}
