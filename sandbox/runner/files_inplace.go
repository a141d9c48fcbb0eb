package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// rewrite writes data over the regular file base of the directory dfd in
// place: the file belongs to another uid, which a new file of the
// runner's cannot be given, and replacing it would hand it to the jail's
// uid. Its inode stays, and with it its owner, group, mode, ACL and hard
// links. Readers may see it half written while this runs; that is the
// price of keeping its owner.
//
// A write that fails half way (a full disk, the limit on file sizes) must
// not lose the old content: it is copied first to a file of the runner's
// beside it, put back on failure, and removed once the write is done. A
// copy that cannot be made fails the write before the file is touched; a
// copy that cannot be put back is kept, and the error names it. o says
// where the content comes from and whether to sync it; stamp gets the
// file's stamp.
func (w *workspace) rewrite(dfd int, base, rel string, old replacedFile, data []byte, o writeOpts, stamp *proto.FileStamp) error {
	jail := w.jailPath(rel)
	fd, err := unix.Openat(dfd, base, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err == unix.EACCES || err == unix.EPERM {
		return faultf(proto.FaultPermission, "write", jail, jail, "%s belongs to another user and the jail's user may not write it: "+
			"the file tools keep a file's owner, so they do not replace it with a file of the jail's; make it writable "+
			"for the jail (chmod g+w, or an ACL) or write to another file", jail)
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "stat", Path: rel, Err: err}
	}
	if st.Dev != old.dev || st.Ino != old.ino {
		return faultf(proto.FaultChanged, "write", jail, jail, "%s was replaced while it was written: retry", jail)
	}
	copyName, cfd := "", -1
	if st.Size > 0 {
		copyName = "." + base + ".warren-" + strconv.FormatUint(rand.Uint64()&(1<<48-1), 16) + ".old"
		cfd, err = unix.Openat(dfd, copyName, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return &fs.PathError{Op: "create", Path: copyName, Err: err}
		}
		defer unix.Close(cfd)
		if err := copyAt(cfd, fd, st.Size); err != nil {
			_ = unix.Unlinkat(dfd, copyName, 0)
			return &fs.PathError{Op: "copy", Path: rel, Err: fmt.Errorf("keep its old content before it is rewritten: %w", err)}
		}
	}
	n, err := o.put(fd, data)
	if err == nil {
		err = unix.Ftruncate(fd, n)
	}
	if err == nil && o.sync {
		err = unix.Fsync(fd)
	}
	if err != nil {
		// Put the old content back.
		var back error
		if cfd >= 0 {
			back = copyAt(fd, cfd, st.Size)
		}
		if back == nil {
			back = unix.Ftruncate(fd, st.Size)
		}
		if back != nil {
			return &fs.PathError{Op: "write", Path: rel, Err: fmt.Errorf("%w; its old content could not be put back (%v) and is kept in %s",
				err, back, w.jailPath(joinRel(rel, copyName)))}
		}
	}
	if copyName != "" {
		_ = unix.Unlinkat(dfd, copyName, 0)
	}
	if err != nil {
		return &fs.PathError{Op: "write", Path: rel, Err: err}
	}
	if unix.Fstat(fd, &st) == nil {
		*stamp = fileStamp(&st)
	}
	return nil
}

// joinRel names the entry name beside rel.
func joinRel(rel, name string) string {
	for i := len(rel) - 1; i >= 0; i-- {
		if rel[i] == '/' {
			return rel[:i+1] + name
		}
	}
	return name
}

// pwriteAll writes data at offset off of fd.
func pwriteAll(fd int, data []byte, off int64) error {
	for len(data) > 0 {
		n, err := unix.Pwrite(fd, data, off)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err
		case n == 0:
			return errors.New("short write")
		}
		data, off = data[n:], off+int64(n)
	}
	return nil
}

// copyAt copies the first n bytes of src over the start of dst, in the
// kernel when it can.
func copyAt(dst, src int, n int64) error {
	var roff, woff int64
	for roff < n {
		m, err := unix.CopyFileRange(src, &roff, dst, &woff, int(min(n-roff, 1<<30)), 0)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EXDEV || err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP:
			return copyByHand(dst, src, roff, n)
		case err != nil:
			return err
		case m == 0:
			return errors.New("the file shrank while it was copied")
		}
	}
	return nil
}

// copyByHand is copyAt through a buffer, from offset off on.
func copyByHand(dst, src int, off, n int64) error {
	buf := make([]byte, 64<<10)
	for off < n {
		m, err := unix.Pread(src, buf[:min(int64(len(buf)), n-off)], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if m == 0 {
			return errors.New("the file shrank while it was copied")
		}
		for done := 0; done < m; {
			k, err := unix.Pwrite(dst, buf[done:m], off+int64(done))
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			done += k
		}
		off += int64(m)
	}
	return nil
}
