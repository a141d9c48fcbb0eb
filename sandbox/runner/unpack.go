package runner

import (
	"errors"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

func init() { register(proto.OpUnpack, unpackOp) }

// unpackOp writes the tree the server sends under the directory it names
// (see proto.OpUnpack). Every directory is held by descriptor and every
// entry made relative to it without following a link: an entry that is
// already there as something else (a link to elsewhere, a file where a
// directory comes) is refused, never written through. Names come through
// proto.TreeReader, which refuses "/", "." and "..", duplicates and
// streams past the limits, so no name can reach out of the root.
//
// What was written stays when the stream breaks off (the server retries
// the whole tree: directories and links already there are taken as they
// are, files are written again), but no file is left half-written: one
// whose content did not arrive whole is removed.
func unpackOp(c *Call) (any, error) {
	var a proto.UnpackArgs
	if err := c.DecodeArgs(&a); err != nil {
		return nil, err
	}
	if !path.IsAbs(a.Root) || a.MaxEntries <= 0 || a.MaxEntries > proto.MaxUnpackEntries ||
		a.MaxDepth <= 0 || a.MaxDepth > proto.MaxUnpackDepth || a.MaxBytes < 0 || a.MaxBytes > proto.MaxUnpackBytes {
		return nil, proto.Errorf(proto.CodeInvalid, "unpack: want an absolute root and limits within %d entries, depth %d, %d bytes",
			proto.MaxUnpackEntries, proto.MaxUnpackDepth, int64(proto.MaxUnpackBytes))
	}
	root, err := unix.Open(a.Root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, proto.Errorf(proto.CodeNotFound, "unpack: open %s: %v", a.Root, err)
	}
	u := &unpacker{dirs: []int{root}, names: []string{a.Root}}
	defer u.close()
	r := proto.NewTreeReader(c.In, proto.TreeLimits{MaxEntries: a.MaxEntries, MaxDepth: a.MaxDepth,
		MaxFileBytes: a.MaxBytes, MaxReadBytes: a.MaxBytes})
	for {
		if err := c.Ctx.Err(); err != nil {
			return nil, proto.Errorf(proto.CodeUnavailable, "unpack: cancelled")
		}
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, unpackError(err)
		}
		if err := u.record(r, rec); err != nil {
			return nil, err
		}
	}
	return proto.UnpackResult{Entries: u.entries, Bytes: u.bytes}, nil
}

// unpackError says what was wrong with the input: a stream that breaks the
// format or its limits is the server's mistake (invalid).
func unpackError(err error) error {
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe
	}
	if errors.Is(err, proto.ErrTree) {
		return proto.Errorf(proto.CodeInvalid, "unpack: %v", err)
	}
	return proto.Errorf(proto.CodeUnavailable, "unpack: reading the input: %v", err)
}

// unpacker holds the directories open along the path being written.
type unpacker struct {
	dirs    []int    // descriptors, the root's first
	names   []string // their names, the root's as the jail sees it
	entries int
	bytes   int64
}

func (u *unpacker) close() {
	for _, fd := range u.dirs {
		unix.Close(fd)
	}
}

// where is the jail's path of name in the directory being written.
func (u *unpacker) where(name string) string {
	return strings.Join(append(u.names[:len(u.names):len(u.names)], name), "/")
}

func (u *unpacker) record(r *proto.TreeReader, rec proto.TreeRecord) error {
	top := u.dirs[len(u.dirs)-1]
	switch rec.Kind {
	case proto.RecEnd:
		unix.Close(top)
		u.dirs, u.names = u.dirs[:len(u.dirs)-1], u.names[:len(u.names)-1]
		return nil
	case proto.RecSkip:
		return nil // an entry the walk left out (a socket, a device): nothing to make
	case proto.RecDir:
		if err := unix.Mkdirat(top, rec.Name, 0o755); err != nil && err != unix.EEXIST {
			return u.fail("create the directory", rec.Name, err)
		}
		// O_NOFOLLOW: a link that was there already is not a directory.
		fd, err := unix.Openat(top, rec.Name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return u.fail("open the directory", rec.Name, err)
		}
		u.dirs, u.names = append(u.dirs, fd), append(u.names, rec.Name)
	case proto.RecLink:
		if err := unix.Symlinkat(rec.Target, top, rec.Name); err == unix.EEXIST {
			if got, rerr := readlinkat(top, rec.Name); rerr != nil || got != rec.Target {
				return u.fail("create the link", rec.Name, err)
			}
		} else if err != nil {
			return u.fail("create the link", rec.Name, err)
		}
	case proto.RecFile:
		if rec.Flag != proto.ContentSent {
			return proto.Errorf(proto.CodeInvalid, "unpack: %s came without its content", u.where(rec.Name))
		}
		if err := u.file(r, top, rec); err != nil {
			return err
		}
	}
	u.entries++
	return nil
}

// file writes a regular file's content, replacing a regular file of that
// name; anything else there (a link, a FIFO, a directory) is refused.
func (u *unpacker) file(r *proto.TreeReader, dir int, rec proto.TreeRecord) error {
	mode := rec.Stamp.Mode & 0o777 // never set-id bits from the input
	// O_NONBLOCK: a FIFO there fails to open for writing instead of
	// waiting for a reader; it is refused below like any non-file.
	fd, err := unix.Openat(dir, rec.Name, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, mode)
	if err != nil {
		return u.fail("create the file", rec.Name, err)
	}
	f := os.NewFile(uintptr(fd), rec.Name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return u.fail("create the file", rec.Name, unix.EEXIST)
	}
	n, err := io.Copy(f, rec.Content)
	if err == nil {
		_, err = r.EndContent()
	}
	if err == nil {
		err = f.Truncate(n)
	}
	if err == nil {
		err = f.Chmod(os.FileMode(mode))
	}
	if err != nil {
		_ = unix.Unlinkat(dir, rec.Name, 0) // never a half-written file
		if errors.Is(err, proto.ErrTree) {
			return unpackError(err)
		}
		return u.fail("write the file", rec.Name, err)
	}
	u.bytes += n
	return nil
}

// fail says which entry could not be made, and why.
func (u *unpacker) fail(what, name string, err error) error {
	code := proto.CodeInternal
	switch {
	case errors.Is(err, unix.EEXIST), errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ENXIO), errors.Is(err, unix.EISDIR):
		return proto.Errorf(proto.CodeConflict, "unpack: %s %s: something else is there already (a link is never written through)", what, u.where(name))
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		code = proto.CodeLimit
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		code = proto.CodeInvalid
	}
	return proto.Errorf(code, "unpack: %s %s: %v", what, u.where(name), err)
}

// readlinkat reads the link name in dir.
func readlinkat(dir int, name string) (string, error) {
	buf := make([]byte, proto.MaxTargetBytes+1)
	n, err := unix.Readlinkat(dir, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
