package tasks

import (
	"context"
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

// hostFile is the BoardFile of a board outside every workspace: the data
// directory's TASKS.md, or a --tasks path the operator chose. No jail
// sees those names, so the server reads and writes the file itself. It
// still keeps to the same rules as a board in a workspace: the file's
// directory is opened by path (the operator's), the file in it by
// descriptor, never following a link, and checked on the descriptor
// before a byte is read; the new file is created and renamed inside the
// opened directory.

// MaxFileSize is the largest TASKS.md the board reads. A board of a
// thousand tasks is about 1 MiB; anything far larger is not a task list
// a person reads, and reading it would cost the server its memory.
const MaxFileSize = 8 << 20

// tempPrefix and tempSuffix frame the names of the board's temporary
// files, so that a later write recognises those a crash left behind.
const (
	tempPrefix = ".warren-"
	tempSuffix = ".tmp"
)

// staleTemp is how old a temporary file must be before a write removes
// it: far longer than any write takes.
const staleTemp = time.Minute

// maxScan bounds how many names cleanTemps looks at.
const maxScan = 4096

// hostFile is the file name in the directory dir.
type hostFile struct {
	dir   string // absolute directory
	name  string // the file's name
	shown string // the path for messages
	// step, set only by tests, runs between the steps of a write (see
	// Board.setStep): the moments a hand edit can race it.
	step    func(name string)
	cleaned time.Time // when cleanTemps last ran; writes run one at a time
}

func newHostFile(path string) *hostFile {
	return &hostFile{dir: filepath.Dir(path), name: filepath.Base(path), shown: path}
}

// at runs the test hook of a step; nil in production.
func (h *hostFile) at(name string) {
	if h.step != nil {
		h.step(name)
	}
}

// Close implements BoardFile: a host file holds nothing open.
func (h *hostFile) Close() error { return nil }

// openDir opens the file's directory; a missing one gives -1 and no error
// (the file does not exist yet).
func (h *hostFile) openDir() (int, error) {
	fd, err := unix.Open(h.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return -1, nil
	}
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", h.dir, err)
	}
	return fd, nil
}

// Stat implements BoardFile.
func (h *hostFile) Stat(context.Context) (FileStamp, error) {
	d, err := h.openDir()
	if err != nil || d < 0 {
		return FileStamp{}, err
	}
	defer unix.Close(d)
	var st unix.Stat_t
	return h.statIn(d, &st)
}

// statIn is the stamp of the file in the opened directory d.
func (h *hostFile) statIn(d int, st *unix.Stat_t) (FileStamp, error) {
	switch err := unix.Fstatat(d, h.name, st, unix.AT_SYMLINK_NOFOLLOW); {
	case errors.Is(err, unix.ENOENT):
		return FileStamp{}, nil
	case err != nil:
		return FileStamp{}, fmt.Errorf("stat %s: %w", h.shown, err)
	}
	if err := h.check(st); err != nil {
		return FileStamp{}, err
	}
	return stampOf(st), nil
}

func stampOf(st *unix.Stat_t) FileStamp {
	return FileStamp{Exists: true, Dev: st.Dev, Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
}

// Read implements BoardFile. Anything but a regular file of at most
// MaxFileSize is refused before a byte is read: it is opened non-blocking
// (a FIFO would block) and not followed (a link may point anywhere), then
// checked on the descriptor.
func (h *hostFile) Read(context.Context) ([]byte, FileStamp, error) {
	d, err := h.openDir()
	if err != nil || d < 0 {
		return nil, FileStamp{}, err
	}
	defer unix.Close(d)
	fd, err := unix.Openat(d, h.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, FileStamp{}, nil
	}
	if errors.Is(err, unix.ELOOP) {
		return nil, FileStamp{}, linkError(h.shown, false)
	}
	if err != nil {
		return nil, FileStamp{}, fmt.Errorf("open %s: %w", h.shown, err)
	}
	f := os.NewFile(uintptr(fd), h.shown)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, FileStamp{}, fmt.Errorf("stat %s: %w", h.shown, err)
	}
	if err := h.check(&st); err != nil {
		return nil, FileStamp{}, err
	}
	// Read into a buffer of the size the file has (one allocation: the
	// server reads a board of a megabyte on every change), growing it if
	// the file grows meanwhile, up to the limit.
	raw := make([]byte, 0, st.Size+512)
	for len(raw) <= MaxFileSize {
		if len(raw) == cap(raw) {
			raw = append(raw, 0)[:len(raw)]
		}
		n, rerr := f.Read(raw[len(raw):min(cap(raw), MaxFileSize+1)])
		raw = raw[:len(raw)+n]
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			err = rerr
			break
		}
	}
	if err != nil {
		return nil, FileStamp{}, fmt.Errorf("read %s: %w", h.shown, err)
	}
	if len(raw) > MaxFileSize {
		return nil, FileStamp{}, tooBigError(h.shown, int64(len(raw)))
	}
	return raw, stampOf(&st), nil
}

// check refuses what is not a plain regular file of a bounded size.
func (h *hostFile) check(st *unix.Stat_t) error {
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return linkError(h.shown, false)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return notRegularError(h.shown, kind(st.Mode))
	case st.Nlink > 1:
		return hardLinksError(h.shown, uint64(st.Nlink))
	case st.Size > MaxFileSize:
		return tooBigError(h.shown, st.Size)
	}
	return nil
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

// Write implements BoardFile: a temporary file is created in the same
// directory (never through a link), given the old file's mode, owner and
// ACL, synced, and renamed over the file if the file is still the version
// was, checked before the temporary file is made and again right before
// the rename.
func (h *hostFile) Write(_ context.Context, data []byte, was FileStamp) (FileStamp, error) {
	d, err := h.openDir()
	if err == nil && d < 0 {
		err = fmt.Errorf("open %s: the directory does not exist", h.dir)
	}
	if err != nil {
		return FileStamp{}, err
	}
	defer unix.Close(d)
	h.cleanTemps(d)
	var st unix.Stat_t
	now, err := h.statIn(d, &st)
	if err != nil {
		return FileStamp{}, err
	}
	if now != was {
		return FileStamp{}, errFileChanged
	}
	h.at("reread")
	// A new file is created like any program creates one: 0666 under
	// the umask or the directory's default ACL. A replaced one keeps its
	// mode, owner and ACL.
	mode, chown, chmod := uint32(0o666), false, false
	uid, gid := 0, 0
	var acl []byte
	if now.Exists {
		chmod = true
		// Never set-id bits.
		mode, uid, gid = st.Mode&0o777, int(st.Uid), int(st.Gid)
		chown = os.Geteuid() == 0
		acl = h.acl(d)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + h.name + tempPrefix + hex.EncodeToString(rnd[:]) + tempSuffix
	fd, err := unix.Openat(d, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return FileStamp{}, fmt.Errorf("write %s: %w", h.shown, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	defer f.Close()
	err = func() error {
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
	if err == nil {
		h.at("temp")
		// The last look before the rename: a hand edit since the look
		// above changes the stamp.
		if again, serr := h.statIn(d, &st); serr != nil || again != was {
			err = errFileChanged
		}
	}
	if err == nil {
		err = unix.Renameat(d, tmp, d, h.name)
		if err == nil {
			h.at("renamed")
		}
	}
	if err != nil {
		_ = unix.Unlinkat(d, tmp, 0)
		if errors.Is(err, errFileChanged) {
			return FileStamp{}, err
		}
		return FileStamp{}, fmt.Errorf("write %s: %w", h.shown, err)
	}
	// The new file's own stamp, after the rename (which changes its
	// ctime): whatever takes the name next is not taken for it.
	if err := unix.Fstat(fd, &st); err != nil {
		return FileStamp{}, fmt.Errorf("stat %s: %w", h.shown, err)
	}
	return stampOf(&st), nil
}

// aclXattr holds a file's POSIX ACL.
const aclXattr = "system.posix_acl_access"

// acl reads the file's ACL through a descriptor that did not follow links.
func (h *hostFile) acl(d int) []byte {
	fd, err := unix.Openat(d, h.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
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

// cleanTemps removes, at most once a minute, the temporary files of this
// board that a killed writer left behind: regular files named like ours,
// older than a minute.
func (h *hostFile) cleanTemps(d int) {
	now := time.Now()
	if now.Sub(h.cleaned) < staleTemp {
		return
	}
	h.cleaned = now
	fd, err := unix.Openat(d, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	dir := os.NewFile(uintptr(fd), h.dir)
	defer dir.Close()
	names, _ := dir.Readdirnames(maxScan)
	prefix := "." + h.name + tempPrefix
	for _, name := range names {
		if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, tempSuffix) {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(d, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if now.Sub(time.Unix(st.Mtim.Unix())) > staleTemp {
			_ = unix.Unlinkat(d, name, 0)
		}
	}
}
