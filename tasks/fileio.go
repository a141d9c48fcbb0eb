package tasks

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The board's file usually lives in a workspace (docs/TASKS.md), where the
// jail controls every name: it can turn TASKS.md into a symlink to a host
// secret, docs/ into a symlink to any directory, the file into a FIFO or a
// sparse file of any size. So the file is reached from a directory the
// operator chose (the root) by descriptors only: each component below the
// root is opened with O_NOFOLLOW, what is read is checked on the opened
// descriptor, and the new file is created and renamed inside the opened
// directory. Symbolic links are refused on the whole path below the root,
// even those that stay inside it: a link the jail can swap is no place to
// write through, and the error says what to do.

// MaxFileSize is the largest TASKS.md the board reads. A board of a
// thousand tasks is about 1 MiB; anything far larger is not a task list
// a person reads, and reading it would cost the server its memory.
const MaxFileSize = 8 << 20

// tempPrefix and tempSuffix frame the names of the board's temporary
// files, so that a later sync recognises those a crash left behind.
const (
	tempPrefix = ".warren-"
	tempSuffix = ".tmp"
)

// staleTemp is how old a temporary file must be before a sync removes it:
// far longer than any write takes.
const staleTemp = time.Minute

// location is where the file is: a root directory opened by path (the
// operator's choice), and the names below it, which may be the jail's.
type location struct {
	root  string   // absolute directory
	dirs  []string // directories between root and the file
	name  string   // the file's name
	shown string   // the path for messages
	// step, set only by tests, runs between the steps of a sync (see
	// Board.step): the moments a hand edit or a change can race a write.
	step func(name string)
}

// at runs the test hook of a step; nil in production.
func (l location) at(name string) {
	if l.step != nil {
		l.step(name)
	}
}

func newLocation(root, path string) (location, error) {
	if root == "" {
		root = filepath.Dir(path)
	}
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return location{}, invalidf("open board: %s is not inside %s", path, root)
	}
	parts := strings.Split(rel, string(filepath.Separator))
	return location{root: root, dirs: parts[:len(parts)-1], name: parts[len(parts)-1], shown: path}, nil
}

// fileDir is the board file's directory, opened without following links.
type fileDir struct {
	fd       int
	uid, gid int // owner of the root: who gets what a root server creates
	chown    bool
}

func (d *fileDir) close() { unix.Close(d.fd) }

// openDir walks from the root to the file's directory without following
// links, creating missing directories when create is set (a workspace
// without docs/ still gets its board). Without create, a missing
// directory gives nil and no error: the file does not exist yet.
func (l location) openDir(create bool) (*fileDir, error) {
	fd, err := unix.Open(l.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", l.root, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat %s: %w", l.root, err)
	}
	d := &fileDir{fd: fd, uid: int(st.Uid), gid: int(st.Gid)}
	// A root server hands what it creates to the owner of the root (the
	// workspace's owner), as the file tools do for the jail's uid.
	d.chown = os.Geteuid() == 0 && d.uid != 0
	walked := l.root
	for _, name := range l.dirs {
		walked = filepath.Join(walked, name)
		next, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			if !create {
				d.close()
				return nil, nil // no directory, so no file yet
			}
			next, err = d.mkdir(name)
		}
		if err != nil {
			err = dirError(d.fd, name, walked, err)
			d.close()
			return nil, err
		}
		unix.Close(d.fd)
		d.fd = next
	}
	return d, nil
}

// mkdir creates a directory below d and opens it.
func (d *fileDir) mkdir(name string) (int, error) {
	// 0777 under the umask, or under the parent's default ACL: a
	// workspace shared with the jail through ACLs shares the new
	// directory the same way.
	if err := unix.Mkdirat(d.fd, name, 0o777); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, err
	}
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	// Only what this root server just made (root-owned) is handed over.
	if d.chown && unix.Fstat(fd, &st) == nil && st.Uid == 0 {
		if err := unix.Fchown(fd, d.uid, d.gid); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

// dirError says why a directory on the way to the file cannot be used.
func dirError(parent int, name, shown string, err error) error {
	var st unix.Stat_t
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		if unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return fmt.Errorf("%s is a symbolic link: the task board does not follow links; make it a directory", shown)
			}
			return fmt.Errorf("%s is not a directory: move it away so the task board can use it", shown)
		}
	}
	return fmt.Errorf("open %s: %w", shown, err)
}

// current is the file as read: its bytes and what identifies this version.
type current struct {
	raw    []byte
	exists bool
	sig    string // see signature
	st     unix.Stat_t
	same   bool // read by compare: the file holds exactly the bytes given
}

// read reads the board's file in d; a missing file is not an error.
// Anything but a regular file of at most MaxFileSize is refused before a
// byte is read: it is opened non-blocking (a FIFO would block) and not
// followed (a link may point anywhere), then checked on the descriptor.
func (l location) read(d *fileDir) (current, error) { return l.readAs(d, nil) }

// readAs is read; with want, the file is compared with want as it is read
// (in small pieces, without holding a copy of it) instead of kept, and
// same says whether they are equal.
func (l location) readAs(d *fileDir, want []byte) (current, error) {
	fd, err := unix.Openat(d.fd, l.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return current{sig: "missing"}, nil
	}
	if errors.Is(err, unix.ELOOP) {
		return current{}, fmt.Errorf("%s is a symbolic link: the task board does not follow links; replace it with a regular file", l.shown)
	}
	if err != nil {
		return current{}, fmt.Errorf("open %s: %w", l.shown, err)
	}
	f := os.NewFile(uintptr(fd), l.shown)
	defer f.Close()
	c := current{exists: true}
	if err := unix.Fstat(fd, &c.st); err != nil {
		return current{}, fmt.Errorf("stat %s: %w", l.shown, err)
	}
	if err := l.check(&c.st); err != nil {
		return current{}, err
	}
	if want != nil {
		c.same, err = sameContent(f, want, c.st.Size)
		if err != nil {
			return current{}, fmt.Errorf("read %s: %w", l.shown, err)
		}
		c.sig = signature(&c.st)
		return c, nil
	}
	// Read into a buffer of the size the file has (one allocation: the
	// server reads a board of a megabyte on every change), growing it if
	// the file grows meanwhile, up to the limit.
	c.raw = make([]byte, 0, c.st.Size+512)
	for len(c.raw) <= MaxFileSize {
		if len(c.raw) == cap(c.raw) {
			c.raw = append(c.raw, 0)[:len(c.raw)]
		}
		n, rerr := f.Read(c.raw[len(c.raw):min(cap(c.raw), MaxFileSize+1)])
		c.raw = c.raw[:len(c.raw)+n]
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			err = rerr
			break
		}
	}
	if err != nil {
		return current{}, fmt.Errorf("read %s: %w", l.shown, err)
	}
	if len(c.raw) > MaxFileSize {
		return current{}, l.tooBig(int64(len(c.raw)))
	}
	c.sig = signature(&c.st)
	return c, nil
}

// sameContent reports whether r, of size bytes, holds exactly want.
func sameContent(r io.Reader, want []byte, size int64) (bool, error) {
	if size != int64(len(want)) {
		return false, nil
	}
	var buf [64 << 10]byte
	for {
		n, err := io.ReadFull(r, buf[:])
		if n > len(want) || !bytes.Equal(buf[:n], want[:n]) {
			return false, nil
		}
		want = want[n:]
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return len(want) == 0, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// check refuses what is not a plain regular file of a bounded size.
func (l location) check(st *unix.Stat_t) error {
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%s is not a regular file (%s): the task board only uses a regular file; remove it", l.shown, kind(st.Mode))
	case st.Nlink > 1:
		// A hard link is the same file elsewhere, perhaps outside the
		// workspace: its content must not be copied into the board.
		return fmt.Errorf("%s has %d hard links: the task board only uses a file that is nowhere else; replace it with a copy", l.shown, st.Nlink)
	case st.Size > MaxFileSize:
		return l.tooBig(st.Size)
	}
	return nil
}

func (l location) tooBig(size int64) error {
	return fmt.Errorf("%s is %d bytes, over the task board's limit of %d (8 MiB): move what is not tasks to another file, or name another board with --tasks", l.shown, size, MaxFileSize)
}

func kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	case unix.S_IFLNK:
		return "a symbolic link"
	}
	return fmt.Sprintf("mode %o", mode&unix.S_IFMT)
}

// signature identifies a version of the file without reading it: a new
// inode (every rename), a new size or a new change time (every write, and
// user space cannot set it back) give a new signature.
func signature(st *unix.Stat_t) string {
	return fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
}

// stat returns the signature of the file as it is now: the cheap check
// that tells whether anyone touched it since the last sync.
func (l location) stat() string {
	d, err := l.openDir(false)
	if err != nil {
		return "unreadable"
	}
	if d == nil {
		return "missing"
	}
	defer d.close()
	var st unix.Stat_t
	switch err := unix.Fstatat(d.fd, l.name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case errors.Is(err, unix.ENOENT):
		return "missing"
	case err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG:
		return "unreadable"
	}
	return signature(&st)
}

// write replaces the file in d with data, if it still holds what was read
// (was): a temporary file is created in the same directory (never through
// a link), given the old file's mode, owner and ACL, synced, and renamed
// over the file. It returns the signature of the new file.
func (l location) write(d *fileDir, data []byte, was current) (string, error) {
	want := was.raw
	if want == nil {
		want = []byte{}
	}
	now, err := l.readAs(d, want)
	if err != nil {
		return "", err
	}
	if now.exists != was.exists || now.exists && !now.same {
		return "", errFileChanged
	}
	l.at("reread")
	// A new file is created like any program creates one: 0666 under
	// the umask or the directory's default ACL. A replaced one keeps its
	// mode, owner and ACL.
	mode, uid, gid, chown, chmod := uint32(0o666), d.uid, d.gid, d.chown, false
	var acl []byte
	if now.exists {
		chmod = true
		// Never set-id bits: the jail chose them.
		mode, uid, gid = now.st.Mode&0o777, int(now.st.Uid), int(now.st.Gid)
		chown = os.Geteuid() == 0
		acl = l.acl(d)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + l.name + tempPrefix + hex.EncodeToString(rnd[:]) + tempSuffix
	fd, err := unix.Openat(d.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return "", fmt.Errorf("write %s: %w", l.shown, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	err = func() error {
		defer f.Close()
		if chown {
			if err := unix.Fchown(fd, uid, gid); err != nil {
				return err
			}
		}
		if chmod {
			if err := unix.Fchmod(fd, mode); err != nil {
				return err
			}
		}
		if acl != nil {
			if err := unix.Fsetxattr(fd, aclXattr, acl, 0); err != nil {
				return err
			}
		}
		if _, err := f.Write(data); err != nil {
			return err
		}
		return f.Sync()
	}()
	var st unix.Stat_t
	if err == nil {
		l.at("temp")
		// The last look before the rename: a hand edit since the read
		// above changes the signature.
		if l.statIn(d, &st) != now.sig {
			err = errFileChanged
		}
	}
	if err == nil {
		err = unix.Renameat(d.fd, tmp, d.fd, l.name)
		if err == nil {
			l.at("renamed")
		}
	}
	if err != nil {
		_ = unix.Unlinkat(d.fd, tmp, 0)
		if errors.Is(err, errFileChanged) {
			return "", err
		}
		return "", fmt.Errorf("write %s: %w", l.shown, err)
	}
	return l.statIn(d, &st), nil
}

// statIn is the signature of the file in an opened directory.
func (l location) statIn(d *fileDir, st *unix.Stat_t) string {
	switch err := unix.Fstatat(d.fd, l.name, st, unix.AT_SYMLINK_NOFOLLOW); {
	case errors.Is(err, unix.ENOENT):
		return "missing"
	case err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG:
		return "unreadable"
	}
	return signature(st)
}

// aclXattr holds a file's POSIX ACL, through which a root-owned tree is
// shared with a jail's uid.
const aclXattr = "system.posix_acl_access"

// acl reads the file's ACL through a descriptor that did not follow links.
func (l location) acl(d *fileDir) []byte {
	fd, err := unix.Openat(d.fd, l.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	n, err := unix.Fgetxattr(fd, aclXattr, buf)
	if err != nil || n <= 0 {
		return nil
	}
	return buf[:n]
}

// maxScan bounds how many names cleanTemps looks at: the jail may fill
// the directory to slow the server down.
const maxScan = 4096

// cleanTemps removes the temporary files of this board that a killed
// writer left behind: regular files named like ours, older than a minute.
func (l location) cleanTemps(d *fileDir, now time.Time) {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	dir := os.NewFile(uintptr(fd), l.shown)
	defer dir.Close()
	names, _ := dir.Readdirnames(maxScan)
	prefix := "." + l.name + tempPrefix
	for _, name := range names {
		if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, tempSuffix) {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if now.Sub(time.Unix(st.Mtim.Unix())) > staleTemp {
			_ = unix.Unlinkat(d.fd, name, 0)
		}
	}
}
