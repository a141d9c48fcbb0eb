package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

func init() { register(proto.OpDiskUsage, duOp) }

// duOp measures the directories the server names (the workspace and home,
// as the jail sees them).
func duOp(c *Call) (any, error) {
	var a proto.DiskUsageArgs
	if err := c.DecodeArgs(&a); err != nil {
		return nil, err
	}
	if len(a.Dirs) > 8 {
		return nil, proto.Errorf(proto.CodeInvalid, "du: at most 8 directories")
	}
	res := proto.DiskUsageResult{Bytes: make([]int64, len(a.Dirs)), Errors: make([]string, len(a.Dirs))}
	for i, d := range a.Dirs {
		if !path.IsAbs(d) {
			return nil, proto.Errorf(proto.CodeInvalid, "du: %q is not an absolute path", proto.Cut(d, 64))
		}
		if err := c.Ctx.Err(); err != nil {
			return nil, proto.Errorf(proto.CodeUnavailable, "cancelled")
		}
		n, err := DiskUsage(d)
		res.Bytes[i] = n
		switch {
		case errors.Is(err, os.ErrNotExist):
			res.Errors[i] = "missing"
		case err != nil:
			res.Errors[i] = proto.Cut(err.Error(), 200)
		}
	}
	return res, nil
}

// maxDepth bounds how deep DiskUsage descends: each level holds an open
// descriptor while its subtree is walked.
const maxDepth = 256

// errTooDeep is returned by DiskUsage for a tree nested deeper than
// maxDepth; the bytes counted until then are a lower bound.
var errTooDeep = fmt.Errorf("directories nest deeper than %d levels", maxDepth)

// DiskUsage walks dir like du -x: the blocks allocated to every file and
// directory (st_blocks, so sparse files count what they use), hard links
// once, without following symbolic links or crossing into another file
// system. Commands may swap entries while the walk runs, so every step
// opens the next directory relative to its parent's descriptor with
// O_NOFOLLOW: a directory replaced by a symlink is not entered. Entries
// that vanish are skipped. A tree deeper than maxDepth returns the bytes
// counted and errTooDeep.
func DiskUsage(dir string) (int64, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return 0, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	w := &duWalker{dev: st.Dev, seen: map[[2]uint64]bool{}, total: st.Blocks * 512}
	err = w.dir(fd, 1)
	return w.total, err
}

type duWalker struct {
	dev   uint64
	seen  map[[2]uint64]bool // inodes with several links, counted once
	total int64
}

// dir adds up the entries of the open directory fd, which it closes.
func (w *duWalker) dir(fd, depth int) error {
	f := os.NewFile(uintptr(fd), "")
	defer f.Close()
	for {
		names, err := f.Readdirnames(1024) // batches: a huge directory is not held whole
		for _, name := range names {
			var st unix.Stat_t
			if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Dev != w.dev {
				continue // vanished, or a mount point: not this tree's
			}
			isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
			if !isDir && st.Nlink > 1 {
				k := [2]uint64{st.Dev, st.Ino}
				if w.seen[k] {
					continue
				}
				w.seen[k] = true
			}
			w.total += st.Blocks * 512
			if !isDir {
				continue
			}
			if depth >= maxDepth {
				return errTooDeep
			}
			// Swapped for a symlink or a file since the stat: refused here.
			cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			if err := w.dir(cfd, depth+1); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || len(names) == 0 {
			return nil
		}
		if err != nil {
			return nil // unreadable: what was counted stands, as du warns and goes on
		}
	}
}
