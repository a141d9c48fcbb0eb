package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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
	if err != nil {
		w.close()
		return nil, "", err
	}
	return w, rel, nil
}

// mkdirAll creates the missing directories of dir one by one, so that each
// new one can be handed to the jail's uid.
func (w *ws) mkdirAll(dir string) error {
	if dir == "." || dir == "" {
		return nil
	}
	cur := ""
	for _, part := range strings.Split(dir, "/") {
		cur = path.Join(cur, part)
		fi, err := w.root.Stat(cur)
		if err == nil {
			if !fi.IsDir() {
				return errorf("%s is a file, not a directory", jailPath(cur))
			}
			continue
		}
		if !isNotExist(err) {
			return err
		}
		if err := w.root.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if w.chown {
			if err := w.root.Lchown(cur, w.uid, w.gid); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeAtomic replaces rel with data through a temporary file in the same
// directory and a rename, so that readers never see a half-written file.
// No fsync: the point is atomic visibility for the jail, not durability
// across a host crash, and fsync would add milliseconds to every edit.
func (w *ws) writeAtomic(rel string, data []byte) error {
	dir, base := path.Split(rel)
	dir = path.Clean(dir)
	if err := w.mkdirAll(dir); err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	uid, gid := w.uid, w.gid
	var acl []byte
	if fi, err := w.root.Lstat(rel); err == nil {
		if fi.IsDir() {
			return errorf("%s is a directory, not a file", jailPath(rel))
		}
		mode = fi.Mode().Perm()
		// Replacing a file keeps its owner and its ACL (through which a
		// root-owned tree is shared with the jail's uid).
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() {
			uid, gid = int(st.Uid), int(st.Gid)
			acl = w.readACL(rel)
		}
	} else if !isNotExist(err) {
		return err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	tmp := path.Join(dir, "."+base+".warren-"+hex.EncodeToString(b[:]))
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil && w.chown {
		err = f.Chown(uid, gid)
	}
	if err == nil && acl != nil {
		err = unix.Fsetxattr(int(f.Fd()), aclXattr, acl, 0)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.root.Rename(tmp, rel)
	}
	if err != nil {
		_ = w.root.Remove(tmp)
		return err
	}
	return nil
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

// readACL returns rel's ACL, or nil when it has none.
func (w *ws) readACL(rel string) []byte {
	f, err := w.root.Open(rel)
	if err != nil {
		return nil
	}
	defer f.Close()
	buf := make([]byte, 1024)
	n, err := unix.Fgetxattr(int(f.Fd()), aclXattr, buf)
	if err != nil || n == 0 {
		return nil
	}
	return buf[:n]
}

// jailPath is rel as the shell sees it.
func jailPath(rel string) string {
	if rel == "." {
		return sandbox.MountPoint
	}
	return sandbox.MountPoint + "/" + rel
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
