package runner

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path"
	"slices"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

func init() { register(proto.OpTree, treeOp) }

// treeOp streams the tree of the directory the server names (the
// workspace, as the jail sees it).
func treeOp(c *Call) (any, error) {
	var a proto.TreeArgs
	if err := c.DecodeArgs(&a); err != nil {
		return nil, err
	}
	if !path.IsAbs(a.Root) || len(a.Prune) > proto.MaxPrune || a.MaxEntries <= 0 || a.MaxDepth <= 0 {
		return nil, proto.Errorf(proto.CodeInvalid, "tree: want an absolute root, at most %d prune patterns and positive limits", proto.MaxPrune)
	}
	known, err := readKeys(c.In, a.MaxEntries)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Open(a.Root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, proto.Errorf(proto.CodeNotFound, "tree: open %s: %v", a.Root, err)
	}
	left, err := WalkTree(c.Ctx, fd, a, known, c.Out)
	if err != nil {
		return nil, err
	}
	return proto.TreeResult{Left: left}, nil
}

// readKeys reads the server's keys of known files (at most max of them)
// and sorts them for lookups.
func readKeys(r io.Reader, max int) ([]uint64, error) {
	var keys []uint64
	br := bufio.NewReader(r)
	var b [8]byte
	for {
		if _, err := io.ReadFull(br, b[:]); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, proto.Errorf(proto.CodeInvalid, "tree: the known keys are not a multiple of 8 bytes")
		}
		if len(keys) >= max {
			return nil, proto.Errorf(proto.CodeInvalid, "tree: more than %d known keys", max)
		}
		keys = append(keys, binary.BigEndian.Uint64(b[:]))
	}
	slices.Sort(keys)
	return keys, nil
}

// WalkTree writes the tree of the directory open as root (which it
// closes) to w as tree records (sandbox/runner/proto), and returns how
// many entries it left out past a.MaxEntries. known are the sorted keys
// of the files whose content the reader has.
//
// The walk never resolves a path that could be swapped under it: it holds
// a descriptor of each directory and opens every entry relative to it
// with O_NOFOLLOW, decides on fstat of that descriptor, reads only regular
// files (bounded), reads links with readlinkat on the link itself, and
// stays on the root's file system. It is the only walker of a workspace:
// the runner runs it inside the jail; the server runs it in its own
// process only over a directory no jail has seen yet (a fresh clone's
// base).
func WalkTree(ctx context.Context, root int, a proto.TreeArgs, known []uint64, w io.Writer) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(root, &st); err != nil {
		unix.Close(root)
		return 0, err
	}
	wk := &treeWalk{ctx: ctx, a: a, known: known, dev: st.Dev, w: bufio.NewWriterSize(w, 64<<10)}
	if err := wk.dir(root, nil, 0); err != nil {
		return 0, err
	}
	return wk.left, wk.w.Flush()
}

type treeWalk struct {
	ctx     context.Context
	a       proto.TreeArgs
	known   []uint64
	dev     uint64
	w       *bufio.Writer
	buf     []byte
	entries int
	left    int64
	read    int64
}

func (wk *treeWalk) emit(b []byte) error {
	wk.buf = b[:0]
	_, err := wk.w.Write(b)
	return err
}

// pruned reports whether the operator's name patterns leave name out.
func (wk *treeWalk) pruned(name string, isDir bool) bool {
	for _, p := range wk.a.Prune {
		if ok, _ := path.Match(p.Glob, name); ok && (isDir || !p.DirOnly) {
			return true
		}
	}
	return false
}

// dir writes the entries of the directory open as fd (which it closes).
func (wk *treeWalk) dir(fd int, rel []string, depth int) error {
	f := os.NewFile(uintptr(fd), "dir")
	defer f.Close()
	// Sorted, as the reader requires: a directory's names are held once.
	names, err := f.Readdirnames(-1)
	if err != nil && len(names) == 0 {
		return nil // unreadable: left as it is (its entry was recorded)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := wk.ctx.Err(); err != nil {
			return err
		}
		if wk.entries >= wk.a.MaxEntries {
			wk.left++
			continue
		}
		if err := wk.entry(fd, append(rel[:len(rel):len(rel)], name), depth); err != nil {
			return err
		}
	}
	return nil
}

// entry writes one entry; one that keeps changing under the walk is
// skipped, and said so.
func (wk *treeWalk) entry(dirfd int, p []string, depth int) error {
	name := p[len(p)-1]
	if len(name) > proto.MaxNameBytes {
		return wk.skip(name[:proto.MaxNameBytes], proto.SkipUnreadable) // no such name on Linux
	}
	// O_PATH opens nothing for real: no FIFO blocks, no device wakes up.
	pfd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil // gone since readdir
	}
	if err != nil {
		return wk.skip(name, proto.SkipUnreadable)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return wk.skip(name, proto.SkipUnreadable)
	}
	if st.Dev != wk.dev {
		return wk.skip(name, proto.SkipOtherFS)
	}
	kind := st.Mode & unix.S_IFMT
	if wk.pruned(name, kind == unix.S_IFDIR) {
		return nil
	}
	switch kind {
	case unix.S_IFLNK:
		// The link itself, through its own descriptor: never what it names.
		buf := make([]byte, proto.MaxTargetBytes+1)
		n, err := unix.Readlinkat(pfd, "", buf)
		if err != nil || n == 0 || n > proto.MaxTargetBytes {
			return wk.skip(name, proto.SkipUnreadable)
		}
		wk.entries++
		return wk.emit(proto.AppendLink(wk.buf, name, string(buf[:n])))
	case unix.S_IFDIR:
		if depth >= wk.a.MaxDepth {
			return wk.skip(name, proto.SkipTooDeep)
		}
		// "." from the directory's own descriptor is that very directory.
		dfd, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return wk.skip(name, proto.SkipUnreadable)
		}
		wk.entries++
		if err := wk.emit(proto.AppendDir(wk.buf, name)); err != nil {
			unix.Close(dfd)
			return err
		}
		if err := wk.dir(dfd, p, depth+1); err != nil {
			return err
		}
		return wk.emit(proto.AppendEnd(wk.buf))
	case unix.S_IFREG:
		for range 3 {
			err := wk.file(dirfd, p, stampOf(&st))
			if !errors.Is(err, errRaced) {
				return err
			}
			if unix.Fstat(pfd, &st) != nil {
				break
			}
		}
		return wk.skip(name, proto.SkipRaced)
	}
	return wk.skip(name, proto.SkipSpecial)
}

func (wk *treeWalk) skip(name string, reason byte) error {
	wk.entries++
	return wk.emit(proto.AppendSkip(wk.buf, name, reason))
}

// errRaced says an entry changed between two looks at it.
var errRaced = errors.New("the entry changed while it was recorded")

func stampOf(st *unix.Stat_t) proto.Stamp {
	return proto.Stamp{Mode: st.Mode, Size: st.Size, Dev: st.Dev, Ino: st.Ino, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
}

// file writes the regular file p (st: fstat of its O_PATH descriptor),
// with its content unless the reader has it or it is over a cap.
func (wk *treeWalk) file(dirfd int, p []string, st proto.Stamp) error {
	name := p[len(p)-1]
	key := proto.StampKey(path.Join(p...), st)
	if _, ok := slices.BinarySearch(wk.known, key); ok {
		wk.entries++
		return wk.emit(proto.AppendFile(wk.buf, name, st, proto.ContentKnown))
	}
	if st.Size > wk.a.MaxFileBytes || wk.read+st.Size > wk.a.MaxReadBytes {
		wk.entries++
		return wk.emit(proto.AppendFile(wk.buf, name, st, proto.ContentWithheld))
	}
	// O_PATH descriptors cannot be read: open the name again, and make
	// sure it is still the same file. O_NONBLOCK: even if it is a FIFO
	// by now, the open does not wait.
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENXIO) {
		return errRaced
	}
	if err != nil {
		wk.entries++
		return wk.emit(proto.AppendSkip(wk.buf, name, proto.SkipUnreadable))
	}
	defer unix.Close(fd)
	var rst unix.Stat_t
	if err := unix.Fstat(fd, &rst); err != nil {
		return errRaced
	}
	if rst.Dev != st.Dev || rst.Ino != st.Ino || rst.Mode&unix.S_IFMT != unix.S_IFREG ||
		rst.Size > wk.a.MaxFileBytes || wk.read+rst.Size > wk.a.MaxReadBytes {
		return errRaced
	}
	stamp := stampOf(&rst)
	wk.entries++
	wk.read += stamp.Size
	if err := wk.emit(proto.AppendFile(wk.buf, name, stamp, proto.ContentSent)); err != nil {
		return err
	}
	complete, err := copyFD(wk.w, fd, stamp.Size)
	if err != nil {
		return err
	}
	var after unix.Stat_t
	still := byte(0)
	if complete && unix.Fstat(fd, &after) == nil && stampOf(&after) == stamp {
		still = 1
	}
	return wk.w.WriteByte(still)
}

// copyFD copies exactly size bytes of the file open as fd to w: what the
// file gives, then zeros if it shrank while it was read (reported false).
func copyFD(w io.Writer, fd int, size int64) (bool, error) {
	buf := make([]byte, 32<<10)
	var done int64
	complete := true
	for done < size {
		k := min(int64(len(buf)), size-done)
		if complete {
			n, err := unix.Read(fd, buf[:k])
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || n <= 0 {
				complete = false
				clear(buf)
				continue
			}
			k = int64(n)
		}
		if _, err := w.Write(buf[:k]); err != nil {
			return false, err
		}
		done += k
	}
	return complete, nil
}
