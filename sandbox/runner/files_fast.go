package runner

import (
	"io"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// Most reads name a regular file with no symbolic link on its path. For
// them openat2 resolves the whole path beneath the workspace's root in one
// system call and refuses any link on it (RESOLVE_NO_SYMLINKS), however the
// jail swaps entries meanwhile; the walk of follow and os.Root costs a
// system call a component, a stat besides, and an os.File (which Go tries
// to add to its poller). Everything else (a link on the path, an error, not
// a regular file, over the limit, a kernel without openat2) goes the slow
// way, which follows links as the jail would and says what is wrong.

// fastOpen is how readFast opens: read-only, never blocking (a FIFO
// swapped in is refused by the stat that follows, not waited on).
var fastOpen = unix.OpenHow{
	Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_CLOEXEC,
	Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
}

// readFast reads the file asked, when the fast way can; ok false means it
// sent nothing and the slow way must answer.
func (w *workspace) readFast(asked string, limit int64, out io.Writer) (res proto.FileReadResult, ok bool) {
	rel, err := w.relPath(asked)
	if err != nil {
		return res, false
	}
	root, err := w.rootFD()
	if err != nil {
		return res, false
	}
	fd, err := unix.Openat2(root, rel, &fastOpen)
	if err != nil {
		return res, false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > limit {
		return res, false
	}
	p := resolved{asked: asked, rel: rel, jail: w.jailPath(rel)}
	n, f := w.send(fdReader(fd), st.Size, p, limit, out)
	if f != nil {
		return proto.FileReadResult{Jail: p.jail, Fault: &f.FileFault}, true
	}
	return proto.FileReadResult{Jail: p.jail, Size: n}, true
}

// fdReader reads a regular file's descriptor directly.
type fdReader int

func (r fdReader) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(int(r), b)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}
