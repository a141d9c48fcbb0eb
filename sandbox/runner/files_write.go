package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// errOverGrowth is what writeAtomic returns when allow refused the growth.
var errOverGrowth = errors.New("over the growth allowed")

// aclXattr holds a file's POSIX ACL.
const aclXattr = "system.posix_acl_access"

// writeAtomic replaces the file rel with data, creating the directories it
// needs, through a temporary file in the same directory and a rename, so
// that readers never see a half-written file. rel comes from resolve:
// links along it were followed already. The directory is opened through
// the root and pinned by its descriptor; the file in it is looked at
// without following a link (the jail may have swapped one in since), so
// the new file keeps the mode, ACL, owner and group of the regular file it
// replaces, never a link's 0777. The runner runs as the jail's uid, which
// cannot give a new file to another uid: a file of another owner (root's
// checkout shared with the jail through an ACL, another user's
// group-writable file) is rewritten in place instead (see rewrite), so
// that it keeps its owner. allow is asked, with the size
// of the file replaced (0 for none), whether the write may go on: it
// returns errOverGrowth before anything is written when it may not. It
// returns the size of the file replaced.
//
// No fsync: the point is atomic visibility for the jail, as for what the
// jail's own commands write (docs/sessions.md, Writing files).
func (w *workspace) writeAtomic(root *os.Root, rel string, data []byte, allow func(old int64) bool) (int64, error) {
	if rel == "." {
		return 0, w.notFile(rel)
	}
	dir, base := path.Split(rel)
	dir = path.Clean(dir)
	d, err := openDir(root, dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		// Create what is missing, then open it again: the directories
		// usually exist, and looking at each first would walk the path
		// once more on every write.
		if err = w.mkdirAll(root, dir); err == nil {
			d, err = openDir(root, dir)
		}
	}
	if err != nil {
		return 0, err
	}
	defer d.Close()
	old, _, err := w.replaceIn(int(d.Fd()), base, rel, data, writeOpts{allow: allow})
	return old, err
}

// writeOpts tune replaceIn.
type writeOpts struct {
	// allow is asked, with the size of the file replaced (0 for none),
	// whether the write may go on; nil allows any.
	allow func(old int64) bool
	// check, when set, is called before anything is written and again
	// right before the rename: an error stops the write (an exact
	// write's compare).
	check func() error
	// sync syncs the new file before it takes the name.
	sync bool
	// src, when set, is the new content instead of data, copied as it
	// comes (at most proto.MaxFileLimit bytes): a large file is never
	// held whole. written gets how many bytes it held.
	src     io.Reader
	written *int64
}

// put writes the new content at the start of fd, from data or o.src,
// and returns its size.
func (o writeOpts) put(fd int, data []byte) (int64, error) {
	if o.src == nil {
		return int64(len(data)), pwriteAll(fd, data, 0)
	}
	buf := make([]byte, 256<<10)
	var off int64
	for {
		n, err := io.ReadFull(o.src, buf)
		if off+int64(n) > proto.MaxFileLimit {
			return off, proto.Errorf(proto.CodeLimit, "the input is over %d bytes", proto.MaxFileLimit)
		}
		if n > 0 {
			if werr := pwriteAll(fd, buf[:n], off); werr != nil {
				return off, werr
			}
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			if o.written != nil {
				*o.written = off
			}
			return off, nil
		}
		if err != nil {
			return off, err
		}
	}
}

// replaceIn replaces the entry base of the directory dfd (rel names it
// for messages) with data, as writeAtomic says. It returns the size of
// the file replaced and the stamp of the one written.
func (w *workspace) replaceIn(dfd int, base, rel string, data []byte, o writeOpts) (int64, proto.FileStamp, error) {
	var stamp proto.FileStamp
	if o.check != nil {
		if err := o.check(); err != nil {
			return 0, stamp, err
		}
	}
	old, err := w.replaced(dfd, base, rel)
	if err != nil {
		return 0, stamp, err
	}
	defer old.release()
	if o.allow != nil && !o.allow(old.size) {
		return old.size, stamp, errOverGrowth
	}
	if old.fd >= 0 && old.uid != runnerUID && runnerUID != 0 {
		return old.size, stamp, w.rewrite(dfd, base, rel, old, data, o, &stamp)
	}
	// Created exclusively: a name the jail made first fails the write, never
	// redirects it.
	tmp := "." + base + ".warren-" + strconv.FormatUint(rand.Uint64()&(1<<48-1), 16)
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, old.mode)
	if err != nil {
		return old.size, stamp, &fs.PathError{Op: "create", Path: tmp, Err: err}
	}
	if old.fd >= 0 && (old.uid != runnerUID || old.gid != runnerGID) {
		// The runner's own file of another group (or any file, for a
		// runner that runs as root): the new file takes the old one's
		// owner and group. A group the runner is not in (or one the
		// jail's user namespace does not map) cannot be given: the file
		// is rewritten in place instead.
		if unix.Fchown(fd, int(old.uid), int(old.gid)) != nil {
			unix.Close(fd)
			_ = unix.Unlinkat(dfd, tmp, 0)
			return old.size, stamp, w.rewrite(dfd, base, rel, old, data, o, &stamp)
		}
	}
	_, err = o.put(fd, data)
	if err == nil && old.acl == nil {
		// The mode asked at creation went through the umask (or the
		// directory's default ACL); an ACL, below, sets the mode bits
		// itself.
		err = unix.Fchmod(fd, old.mode)
	}
	if err == nil && old.acl != nil {
		err = unix.Fsetxattr(fd, aclXattr, old.acl, 0)
	}
	if err == nil && o.sync {
		err = unix.Fsync(fd)
	}
	if err != nil {
		err = &fs.PathError{Op: "write", Path: tmp, Err: err}
	} else if o.check != nil {
		err = o.check()
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, base)
	}
	if err == nil {
		// The new file's own stamp, after the rename (which changes its
		// ctime): whatever takes the name next is not taken for it.
		var st unix.Stat_t
		if err = unix.Fstat(fd, &st); err == nil {
			stamp = fileStamp(&st)
		}
		unix.Close(fd)
		return old.size, stamp, err
	}
	unix.Close(fd)
	_ = unix.Unlinkat(dfd, tmp, 0)
	return old.size, stamp, err
}

// fileStamp is the stamp of a regular file's stat.
func fileStamp(st *unix.Stat_t) proto.FileStamp {
	return proto.FileStamp{Dev: st.Dev, Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Links: uint64(st.Nlink)}
}

// openDir opens the directory dir of the workspace, to create and rename
// entries in it by descriptor. O_NONBLOCK spares the runtime's attempt to
// make the descriptor pollable; it means nothing for a directory.
func openDir(root *os.Root, dir string) (*os.File, error) {
	return root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
}

// notFile refuses to write over the directory rel.
func (w *workspace) notFile(rel string) *fault {
	jail := w.jailPath(rel)
	f := faultf(proto.FaultNotRegular, "write", jail, jail, "%s is a directory, not a file", jail)
	f.Type = proto.TypeDir
	return f
}

// replacedFile is what a write keeps of the regular file it replaces
// (mode, ACL), its size, and a descriptor of it, held until the new file
// has taken its name.
type replacedFile struct {
	mode     uint32
	size     int64
	acl      []byte
	uid, gid uint32
	dev, ino uint64
	fd       int // O_PATH; -1 when nothing is replaced
}

// The runner's own ids: who owns what it creates.
var (
	runnerUID = uint32(os.Geteuid())
	runnerGID = uint32(os.Getegid())
)

// release lets the replaced file go. The rename dropped its name, so
// closing the last descriptor frees it: the kernel truncates it and
// returns its blocks, about 100 µs on ext4, which the caller need not
// wait for: the write is done and visible.
func (r replacedFile) release() {
	if r.fd >= 0 {
		go unix.Close(r.fd)
	}
}

// replaced looks at the entry base of the directory dfd, which a write is
// about to replace, without following it, and returns what the new file
// keeps of it. A new file gets 0644. The caller releases what it returns.
func (w *workspace) replaced(dfd int, base, rel string) (replacedFile, error) {
	r := replacedFile{mode: 0o644, fd: -1}
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
	jail := w.jailPath(rel)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		unix.Close(fd)
		return r, w.notFile(rel)
	case unix.S_IFLNK:
		unix.Close(fd)
		return r, faultf(proto.FaultChanged, "write", jail, jail, "%s became a symbolic link while it was written: retry", jail)
	default:
		unix.Close(fd)
		f := faultf(proto.FaultNotRegular, "write", jail, jail, "%s is not a regular file", jail)
		f.Type = typeName(fileType(st.Mode))
		return r, f
	}
	// An O_PATH descriptor has no xattr calls of its own; its /proc link
	// reaches the same inode, not a path the jail could change.
	buf := make([]byte, 1024)
	if n, err := unix.Getxattr(fmt.Sprintf("/proc/self/fd/%d", fd), aclXattr, buf); err == nil && n > 0 {
		r.acl = buf[:n]
	}
	r.mode, r.size, r.fd = st.Mode&0o777, st.Size, fd
	r.uid, r.gid, r.dev, r.ino = st.Uid, st.Gid, st.Dev, st.Ino
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

// mkdirAll creates the missing directories of dir one by one.
func (w *workspace) mkdirAll(root *os.Root, dir string) error {
	if dir == "." || dir == "" {
		return nil
	}
	cur := "."
	for _, part := range strings.Split(dir, "/") {
		next := path.Join(cur, part)
		fi, err := root.Stat(next)
		switch {
		case err == nil && !fi.IsDir():
			jail := w.jailPath(next)
			return faultf(proto.FaultNotDir, "mkdir", jail, jail, "%s is a file, not a directory", jail)
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return err
		case err != nil:
			if err := root.Mkdir(next, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		}
		cur = next
	}
	return nil
}
