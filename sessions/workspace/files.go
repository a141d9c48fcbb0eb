package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Files is a workspace opened on this host for reading and writing its
// files on a session's behalf. The jail controls everything in the
// workspace, so nothing here trusts a path: every entry is reached through
// an os.Root of the workspace (never a link out of it), descriptors are
// checked after they are opened (never check-then-open by path), only
// regular files are read or replaced, reads are bounded, and what a write
// creates belongs to the jail's uid as if the jail had made it.
//
// A Files serves one call: open it, resolve the path, read or write, and
// Close. It is safe for one goroutine.
type Files struct {
	root     *os.Root
	mount    string // where the jail sees the workspace
	uid, gid int
	chown    bool // the server runs as root: hand new files to the jail's uid
}

// Jail is how a jail sees its workspace: where it is mounted, and the uid
// and gid its processes make files as.
type Jail struct {
	Mount    string
	UID, GID int
}

// Path is an entry of the workspace that a caller named, resolved.
type Path struct {
	// Asked is the path as the caller gave it, for messages.
	Asked string
	// Rel is the entry relative to the workspace, with the links along it
	// followed.
	Rel string
	// Jail is the entry as the jail sees it (/workspace/...).
	Jail string
	// size is the entry's size when Resolve found a regular file there.
	size int64
}

// euid is the server's effective uid, which does not change.
var euid = sync.OnceValue(os.Geteuid)

// OpenFiles opens the workspace dir, which a jail sees as j describes.
func OpenFiles(dir string, j Jail) (*Files, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot open the workspace %s: %v", dir, err)
	}
	return &Files{
		root: r, mount: j.Mount, uid: j.UID, gid: j.GID,
		// Files created by a root server would be read-only to the jail.
		chown: euid() == 0 && j.UID != 0,
	}, nil
}

// Close closes the workspace's root.
func (f *Files) Close() error { return f.root.Close() }

// jailPath is rel as the jail sees it.
func (f *Files) jailPath(rel string) string {
	if rel == "." {
		return f.mount
	}
	return f.mount + "/" + rel
}

// Size is the size of the regular file at p, 0 when there is none (what a
// write to p replaces, for quotas), as Resolve found it. The jail can
// change it at any time; a quota check is an estimate either way.
func (f *Files) Size(p Path) int64 { return p.size }

// ReadFile reads the regular file at p, of at most limit bytes. Anything
// else is refused before a byte is read: a FIFO would block the call
// forever (it is opened non-blocking, then checked), a device or a huge
// file would flood the server's memory. A missing file matches
// fs.ErrNotExist.
func (f *Files) ReadFile(p Path, limit int64) ([]byte, error) {
	fh, err := f.root.OpenFile(p.Rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, f.systemError("read", p, err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, f.systemError("read", p, err)
	}
	switch {
	case fi.IsDir():
		e := fileErrorf("read", p.Asked, p.Jail, ErrNotRegular, "%s is a directory", p.Asked)
		e.Type = fs.ModeDir
		return nil, e
	case !fi.Mode().IsRegular():
		e := fileErrorf("read", p.Asked, p.Jail, ErrNotRegular, "%s is not a regular file (%s)", p.Asked, fi.Mode().Type())
		e.Type = fi.Mode().Type()
		return nil, e
	case fi.Size() > limit:
		e := fileErrorf("read", p.Asked, p.Jail, ErrTooBig, "%s is %d bytes, over the limit of %d", p.Asked, fi.Size(), limit)
		e.Size, e.Limit = fi.Size(), limit
		return nil, e
	}
	data, err := io.ReadAll(io.LimitReader(fh, limit+1))
	if err != nil {
		return nil, f.systemError("read", p, err)
	}
	if int64(len(data)) > limit {
		e := fileErrorf("read", p.Asked, p.Jail, ErrTooBig, "%s grew past the limit of %d bytes while it was read", p.Asked, limit)
		e.Limit = limit
		return nil, e
	}
	return data, nil
}

// WriteFile replaces the file at p with data, creating the directories it
// needs, through a temporary file in the same directory and a rename, so
// that readers never see a half-written file. p comes from Resolve: links
// along it were followed already. The directory is opened through os.Root
// and pinned by its descriptor; the file in it is looked at without
// following a link (a jail may have swapped one in since Resolve), so the
// new file keeps the mode, owner and ACL (the latter shares a root-owned
// tree with the jail's uid) of the regular file it replaces, never a
// link's 0777 or a file's outside.
//
// No fsync: the point is atomic visibility for the jail, as for what the
// jail's own commands write; syncing would double the cost of a small
// write (docs/sessions.md, Writing files, has the figures and what a host
// crash can do).
func (f *Files) WriteFile(p Path, data []byte) error {
	if err := f.writeAtomic(p.Rel, data); err != nil {
		return f.systemError("write", p, err)
	}
	return nil
}

func (f *Files) writeAtomic(rel string, data []byte) error {
	dir, base := path.Split(rel)
	dir = path.Clean(dir)
	if rel == "." {
		return f.notFile(rel)
	}
	d, err := f.openDir(dir)
	if isNotExist(err) || errors.Is(err, syscall.ENOTDIR) {
		// Create what is missing, then open it again: the directories
		// usually exist, and looking at each first would walk the path
		// once more on every write.
		if err = f.mkdirAll(dir); err == nil {
			d, err = f.openDir(dir)
		}
	}
	if err != nil {
		return err
	}
	defer d.Close()
	dfd := int(d.Fd())
	old, err := f.replaced(dfd, base, rel)
	if err != nil {
		return err
	}
	defer old.release()
	mode, uid, gid, acl := old.mode, old.uid, old.gid, old.acl
	var b [6]byte
	_, _ = rand.Read(b[:])
	tmp := "." + base + ".warren-" + hex.EncodeToString(b[:])
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return &fs.PathError{Op: "create", Path: tmp, Err: err}
	}
	err = writeAll(fd, data)
	if err == nil && acl == nil {
		// The mode asked at creation went through the umask (or the
		// directory's default ACL); an ACL, below, sets the mode bits
		// itself.
		err = unix.Fchmod(fd, mode)
	}
	if err == nil && f.chown {
		err = unix.Fchown(fd, uid, gid)
	}
	if err == nil && acl != nil {
		err = unix.Fsetxattr(fd, aclXattr, acl, 0)
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		err = &fs.PathError{Op: "write", Path: tmp, Err: err}
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

// openDir opens the directory dir of the workspace, to create and rename
// entries in it by descriptor. O_NONBLOCK spares the runtime's attempt to
// make the descriptor pollable (four fcntl calls); it means nothing for a
// directory.
func (f *Files) openDir(dir string) (*os.File, error) {
	return f.root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
}

// writeAll writes data to fd, through short writes and interruptions.
func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err
		case n == 0:
			return io.ErrShortWrite
		}
		data = data[n:]
	}
	return nil
}

// notFile refuses to write over the directory rel.
func (f *Files) notFile(rel string) error {
	e := fileErrorf("write", f.jailPath(rel), f.jailPath(rel), ErrNotRegular, "%s is a directory, not a file", f.jailPath(rel))
	e.Type = fs.ModeDir
	return e
}

// replacedFile is what a write keeps of the regular file it replaces
// (mode, owner, ACL), and a descriptor of it, held until the new file has
// taken its name.
type replacedFile struct {
	mode     uint32
	uid, gid int
	acl      []byte
	fd       int // O_PATH; -1 when nothing is replaced
}

// release lets the replaced file go. The rename dropped its name, so
// closing the last descriptor frees it: the kernel truncates it and
// returns its blocks (with -o discard, trims them too), about 100 µs on
// ext4, which the caller need not wait for: the write is done and visible.
// It is handed to a closer in the background, or closed here when the
// closer is behind.
func (r replacedFile) release() {
	if r.fd < 0 {
		return
	}
	closerOnce.Do(func() { go closer() })
	select {
	case toClose <- r.fd:
	default:
		unix.Close(r.fd)
	}
}

// toClose feeds closer; a full queue means it is behind, and the writer
// closes its own descriptor.
var (
	toClose    = make(chan int, 64)
	closerOnce sync.Once
)

func closer() {
	for fd := range toClose {
		unix.Close(fd)
	}
}

// replaced looks at the entry base of the directory dfd, which a write is
// about to replace, without following it, and returns what the new file
// keeps of it: mode, owner and ACL. A new file gets 0644 and the jail's uid.
// The caller releases what it returns.
func (f *Files) replaced(dfd int, base, rel string) (replacedFile, error) {
	r := replacedFile{mode: 0o644, uid: f.uid, gid: f.gid, fd: -1}
	fd, err := unix.Openat(dfd, base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return r, nil
	}
	if err != nil {
		return r, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return r, &fs.PathError{Op: "stat", Path: rel, Err: err}
	}
	jail := f.jailPath(rel)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		unix.Close(fd)
		return r, f.notFile(rel)
	case unix.S_IFLNK:
		unix.Close(fd)
		return r, fileErrorf("write", jail, jail, ErrChanged, "%s became a symbolic link while it was written: retry", jail)
	default:
		unix.Close(fd)
		e := fileErrorf("write", jail, jail, ErrNotRegular, "%s is not a regular file", jail)
		e.Type = fileType(st.Mode)
		return r, e
	}
	// An O_PATH descriptor has no xattr calls of its own; its /proc link
	// reaches the same inode, not a path the jail could change.
	buf := make([]byte, 1024)
	if n, err := unix.Getxattr(fmt.Sprintf("/proc/self/fd/%d", fd), aclXattr, buf); err == nil && n > 0 {
		r.acl = buf[:n]
	}
	r.mode, r.uid, r.gid, r.fd = st.Mode&0o777, int(st.Uid), int(st.Gid), fd
	return r, nil
}

// fileType is the fs type bits of a stat mode.
func fileType(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	case unix.S_IFSOCK:
		return fs.ModeSocket
	}
	return fs.ModeIrregular
}

// mkdirAll creates the missing directories of dir one by one, so that each
// new one can be handed to the jail's uid.
func (f *Files) mkdirAll(dir string) error {
	if dir == "." || dir == "" {
		return nil
	}
	cur := "."
	for _, part := range strings.Split(dir, "/") {
		next := path.Join(cur, part)
		fi, err := f.root.Stat(next)
		switch {
		case err == nil && !fi.IsDir():
			jail := f.jailPath(next)
			return fileErrorf("mkdir", jail, jail, ErrNotDir, "%s is a file, not a directory", jail)
		case err != nil && !isNotExist(err):
			return err
		case err != nil:
			if err := f.mkdir(cur, part); err != nil {
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
func (f *Files) mkdir(parent, name string) error {
	d, err := f.root.OpenFile(parent, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	rel := path.Join(parent, name)
	err = unix.Mkdirat(int(d.Fd()), name, 0o755)
	if err == unix.EEXIST || (err == nil && !f.chown) {
		return nil // made by someone else in the meantime, or nobody to hand it to
	}
	if err != nil {
		return &fs.PathError{Op: "mkdir", Path: rel, Err: err}
	}
	jail := f.jailPath(rel)
	changed := fileErrorf("mkdir", jail, jail, ErrChanged, "%s changed while it was created: retry", jail)
	fd, err := unix.Openat(int(d.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return changed
	}
	dh := os.NewFile(uintptr(fd), rel)
	defer dh.Close()
	if names, _ := dh.Readdirnames(1); len(names) > 0 {
		return changed
	}
	return dh.Chown(f.uid, f.gid)
}

// aclXattr holds a file's POSIX ACL.
const aclXattr = "system.posix_acl_access"
