package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// A tree walk by descriptors, for host-side code that changes a workspace
// the jail controls (granting ACLs, handing it over with chown). A jail
// sharing the workspace can swap any entry for a symlink between two system
// calls, so nothing here looks an entry up by path twice: each entry is
// opened once, relative to its parent's descriptor, without following a
// symlink, and everything after that (type, mount, ACL, owner) is read and
// changed on that descriptor. Whatever the jail renames afterwards, the
// descriptor still names the inode that was checked.

// maxTreeDepth bounds how deep a walk descends: each level holds one
// descriptor open, and a jail could nest directories without end.
const maxTreeDepth = 1000

// treeEntry is a regular file or a directory of a tree being walked, held
// open by descriptor.
type treeEntry struct {
	// fd is O_PATH for a file, O_RDONLY|O_DIRECTORY for a directory.
	fd int
	// stat is what statx said of fd.
	stat unix.Statx_t
	// path names the entry in error messages only; it is never opened.
	path string
}

func (e *treeEntry) isDir() bool { return e.stat.Mode&unix.S_IFMT == unix.S_IFDIR }

// perm returns the entry's permission bits.
func (e *treeEntry) perm() uint16 { return e.stat.Mode & 0o777 }

// procPath names the open inode itself for the calls that have no
// descriptor form usable on O_PATH descriptors (getxattr and setxattr):
// the kernel resolves /proc/self/fd/N straight to the inode that was
// opened, whatever its name now points to.
func (e *treeEntry) procPath() string { return "/proc/self/fd/" + strconv.Itoa(e.fd) }

// treeRoot is the opened top of a walk.
type treeRoot struct {
	treeEntry
	// real is where the top really is, read back from the descriptor:
	// decisions about the directory are made on this, not on the path the
	// caller gave, which may run through symlinks.
	real string
}

// openTree opens dir (the caller's path, symlinks in it followed: it is the
// server's to choose) as the top of a walk.
func openTree(dir string) (*treeRoot, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	r := &treeRoot{treeEntry: treeEntry{fd: fd, path: dir}}
	if err := statFD(fd, &r.stat); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat %s: %w", dir, err)
	}
	r.real, err = os.Readlink(r.procPath())
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("resolve %s: %w", dir, err)
	}
	return r, nil
}

func (r *treeRoot) close() { unix.Close(r.fd) }

// statFD fills st for the descriptor itself (for an O_PATH descriptor of a
// symlink, the link, never its target).
func statFD(fd int, st *unix.Statx_t) error {
	return unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW,
		unix.STATX_BASIC_STATS|unix.STATX_MNT_ID, st)
}

// sameMount reports whether st lies on the same mount as the top: a walk
// never crosses into another file system or bind mount, where the jail's
// workspace ends and someone else's files begin.
func (r *treeRoot) sameMount(st *unix.Statx_t) bool {
	if st.Dev_major != r.stat.Dev_major || st.Dev_minor != r.stat.Dev_minor {
		return false
	}
	if st.Mask&r.stat.Mask&unix.STATX_MNT_ID != 0 {
		return st.Mnt_id == r.stat.Mnt_id
	}
	return true // a kernel older than 5.8 tells the device only
}

// walk calls fn on the top and on every regular file and directory below
// it, parents before children. Symlinks, FIFOs, sockets and devices are
// skipped without being opened for I/O, as is anything on another mount;
// entries that vanish while the walk runs are skipped too. fn must not keep
// the entry: its descriptor is closed when fn returns.
func (r *treeRoot) walk(fn func(*treeEntry) error) error {
	if err := fn(&r.treeEntry); err != nil {
		return err
	}
	return r.walkDir(r.fd, r.path, 1, fn)
}

func (r *treeRoot) walkDir(dirfd int, dir string, depth int, fn func(*treeEntry) error) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("%s nests directories more than %d deep: warren will not walk it; "+
			"flatten or remove it", dir, maxTreeDepth)
	}
	buf := make([]byte, 16<<10)
	var names []string
	for {
		n, err := unix.ReadDirent(dirfd, buf)
		if err != nil {
			return fmt.Errorf("read directory %s: %w", dir, err)
		}
		if n <= 0 {
			return nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names[:0])
		for _, name := range names {
			if err := r.visit(dirfd, filepath.Join(dir, name), name, depth, fn); err != nil {
				return err
			}
		}
	}
}

// visit opens one entry of the directory dirfd and hands it to fn,
// descending into it when it is a directory.
func (r *treeRoot) visit(dirfd int, path, name string, depth int, fn func(*treeEntry) error) error {
	// O_PATH opens without I/O: a FIFO cannot block it, a device's driver
	// is not called, and with O_NOFOLLOW a symlink is opened as itself.
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil // removed since the directory was read
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	e := treeEntry{fd: fd, path: path}
	defer func() { unix.Close(e.fd) }()
	if err := statFD(fd, &e.stat); err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if !r.sameMount(&e.stat) {
		return nil
	}
	switch e.stat.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return fn(&e)
	case unix.S_IFDIR:
		// Reopen the very directory that was checked, through its own
		// descriptor, to read it.
		dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		unix.Close(fd)
		e.fd = dfd
		if err := fn(&e); err != nil {
			return err
		}
		return r.walkDir(dfd, path, depth+1, fn)
	}
	return nil // symlinks, FIFOs, sockets, devices: never the jail's to be given
}
