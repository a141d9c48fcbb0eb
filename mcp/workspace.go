package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions"
)

// ws is a session's workspace opened for the file tools.
type ws struct {
	root     *os.Root
	session  *sessions.Session
	uid, gid int
	chown    bool // the server runs as root: hand new files to the jail's uid
}

// workspace opens the caller's session's workspace, for writing or only
// reading (archived and paused sessions refuse writes; a workspace over
// its quota too). It creates the session's shell object (no process) to
// learn which uid the jail runs as.
func (d *deps) workspace(ctx context.Context, sessionID string, write bool) (*ws, error) {
	user, err := callerOf(ctx)
	if err != nil {
		return nil, err
	}
	s, sh, err := d.sessions.OpenFiles(ctx, user, sessionID, write)
	if err != nil {
		return nil, err
	}
	r, err := openRoot(s.Workspace)
	if err != nil {
		return nil, err
	}
	w := &ws{root: r, session: s}
	w.uid, w.gid = sh.Owner()
	// Files created by a root server would be read-only to the jail.
	w.chown = os.Geteuid() == 0 && w.uid != 0
	return w, nil
}

func (w *ws) close() { w.root.Close() }

// openPath opens the call's workspace and resolves path in it: what every
// file tool starts with.
func (d *deps) openPath(ctx context.Context, sessionID, path string, write bool) (*ws, string, error) {
	w, err := d.workspace(ctx, sessionID, write)
	if err != nil {
		return nil, "", err
	}
	rel, err := workspacePath(path)
	if err == nil {
		rel, err = w.resolve(rel)
	}
	if err != nil {
		w.close()
		return nil, "", fileError(path, err)
	}
	return w, rel, nil
}

// mkdirAll creates the missing directories of dir one by one, so that each
// new one can be handed to the jail's uid.
func (w *ws) mkdirAll(dir string) error {
	if dir == "." || dir == "" {
		return nil
	}
	cur := "."
	for _, part := range strings.Split(dir, "/") {
		next := path.Join(cur, part)
		fi, err := w.root.Stat(next)
		switch {
		case err == nil && !fi.IsDir():
			return errorf("%s is a file, not a directory", jailPath(next))
		case err != nil && !isNotExist(err):
			return err
		case err != nil:
			if err := w.mkdir(cur, part); err != nil {
				return err
			}
		}
		cur = next
	}
	return nil
}

// mkdir creates the directory name in parent and hands it to the jail's
// uid. The chown goes through a descriptor of the new directory, opened
// without following links and checked empty: by name, a jail that swaps
// the new directory for one of its root-owned files (rename with
// RENAME_EXCHANGE) would have the server give that file away.
func (w *ws) mkdir(parent, name string) error {
	d, err := w.root.OpenFile(parent, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	rel := path.Join(parent, name)
	err = unix.Mkdirat(int(d.Fd()), name, 0o755)
	if err == unix.EEXIST || (err == nil && !w.chown) {
		return nil // made by someone else in the meantime, or nobody to hand it to
	}
	if err != nil {
		return &fs.PathError{Op: "mkdir", Path: rel, Err: err}
	}
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return errorf("%s changed while it was created: retry", jailPath(rel))
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return errorf("%s changed while it was created: retry", jailPath(rel))
	}
	return f.Chown(w.uid, w.gid)
}

// writeAtomic replaces rel with data through a temporary file in the same
// directory and a rename, so that readers never see a half-written file.
// rel comes from resolve: links along it were followed already. The
// directory is opened through os.Root and pinned by its descriptor; the
// file in it is looked at without following a link (a jail may have swapped
// one in since resolve), so the new file keeps the mode, owner and ACL (the
// latter shares a root-owned tree with the jail's uid) of the regular file
// it replaces, never a link's 0777 or a file's outside. No fsync: the point
// is atomic visibility for the jail, not durability across a host crash,
// and fsync would add milliseconds to every edit.
func (w *ws) writeAtomic(rel string, data []byte) error {
	dir, base := path.Split(rel)
	dir = path.Clean(dir)
	if rel == "." {
		return errorf("%s is a directory, not a file", jailPath(rel))
	}
	if err := w.mkdirAll(dir); err != nil {
		return err
	}
	d, err := w.root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	dfd := int(d.Fd())
	mode, uid, gid, acl, err := w.replaced(dfd, base, rel)
	if err != nil {
		return err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	tmp := "." + base + ".warren-" + hex.EncodeToString(b[:])
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return &fs.PathError{Op: "create", Path: tmp, Err: err}
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(fs.FileMode(mode))
	}
	if err == nil && w.chown {
		err = f.Chown(uid, gid)
	}
	if err == nil && acl != nil {
		err = unix.Fsetxattr(fd, aclXattr, acl, 0)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, base)
	}
	if err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return err
	}
	return nil
}

// replaced looks at the entry base of the directory dfd, which a write is
// about to replace, without following it, and returns what the new file
// keeps of it: mode, owner and ACL. A new file gets 0644 and the jail's uid.
func (w *ws) replaced(dfd int, base, rel string) (mode uint32, uid, gid int, acl []byte, err error) {
	mode, uid, gid = 0o644, w.uid, w.gid
	fd, err := unix.Openat(dfd, base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return mode, uid, gid, nil, nil
	}
	if err != nil {
		return 0, 0, 0, nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, 0, 0, nil, &fs.PathError{Op: "stat", Path: rel, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return 0, 0, 0, nil, errorf("%s is a directory, not a file", jailPath(rel))
	case unix.S_IFLNK:
		return 0, 0, 0, nil, errorf("%s became a symbolic link while it was written: retry", jailPath(rel))
	default:
		return 0, 0, 0, nil, errorf("%s is not a regular file: inspect it with shell_exec, e.g. 'ls -l %s'", jailPath(rel), jailPath(rel))
	}
	// An O_PATH descriptor has no xattr calls of its own; its /proc link
	// reaches the same inode, not a path the jail could change.
	buf := make([]byte, 1024)
	if n, err := unix.Getxattr(fmt.Sprintf("/proc/self/fd/%d", fd), aclXattr, buf); err == nil && n > 0 {
		acl = buf[:n]
	}
	return st.Mode & 0o777, int(st.Uid), int(st.Gid), acl, nil
}

// readFile reads a regular file of at most maxReadBytes. Anything else is
// refused before a byte is read: a FIFO would block the call forever (it is
// opened non-blocking, then checked), a device or a huge file would flood
// the server's memory. The error keeps fs.ErrNotExist for missing files.
func (w *ws) readFile(rel, asked, tool string) ([]byte, error) {
	f, err := w.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fileError(asked, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileError(asked, err)
	}
	switch {
	case fi.IsDir():
		return nil, errorf("%s is a directory: list it with shell_exec 'ls -la %s'", asked, jailPath(rel))
	case !fi.Mode().IsRegular():
		return nil, errorf("%s is not a regular file (%s): inspect it with shell_exec, e.g. 'ls -l %s'", asked, fi.Mode().Type(), jailPath(rel))
	case fi.Size() > maxReadBytes:
		return nil, errorf("%s is %d bytes, over %s's limit of %d: use shell_exec (head, sed -n, grep) instead", asked, fi.Size(), tool, maxReadBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxReadBytes+1))
	if err != nil {
		return nil, fileError(asked, err)
	}
	if len(data) > maxReadBytes {
		return nil, errorf("%s grew past %s's limit of %d bytes while it was read", asked, tool, maxReadBytes)
	}
	return data, nil
}

// aclXattr holds a file's POSIX ACL.
const aclXattr = "system.posix_acl_access"

// jailPath is rel as the shell sees it.
func jailPath(rel string) string {
	if rel == "." {
		return sandbox.MountPoint
	}
	return sandbox.MountPoint + "/" + rel
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
