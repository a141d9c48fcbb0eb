package sessions

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// maxDepth bounds how deep DiskUsage descends: each level holds an open
// descriptor while its subtree is walked.
const maxDepth = 256

// errTooDeep is returned by DiskUsage for a tree nested deeper than
// maxDepth; the bytes counted until then are a lower bound.
var errTooDeep = fmt.Errorf("directories nest deeper than %d levels", maxDepth)

// DiskUsage walks dir like du -x: the blocks allocated to every file and
// directory (st_blocks, so sparse files count what they use), hard links
// once, without following symbolic links or crossing into another file
// system. The jail controls the tree and may swap entries while the walk
// runs, so every step opens the next directory relative to its parent's
// descriptor with O_NOFOLLOW: a directory replaced by a symlink is not
// entered, and nothing outside dir is ever counted. Entries that vanish
// are skipped. A tree deeper than maxDepth returns the bytes counted and
// errTooDeep.
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
