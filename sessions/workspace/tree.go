package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"golang.org/x/sys/unix"
)

// Limits bound what one walk of a workspace reads and records, and what a
// diff holds. The workspace is the jail's: without bounds one huge file, a
// million empty ones or a very deep tree would cost the server its memory,
// time or disk.
type Limits struct {
	// MaxFileBytes: a regular file larger than this is recorded as a
	// marker naming its size, not its content.
	MaxFileBytes int64
	// MaxReadBytes: once one walk has read this much content, the changed
	// files it has not read yet are recorded as markers too.
	MaxReadBytes int64
	// MaxEntries caps the entries one walk records; the rest are left out
	// and the diff says so.
	MaxEntries int
	// MaxDepth caps how deep a walk descends.
	MaxDepth int
	// DiffFileBytes: a diff summarises files larger than this ("large
	// file, N bytes") instead of comparing them line by line.
	DiffFileBytes int64
	// MaxFiles caps the per-file summary of one diff.
	MaxFiles int
}

// DefaultLimits are the limits of an Audit unless its owner sets others.
var DefaultLimits = Limits{
	MaxFileBytes:  16 << 20,
	MaxReadBytes:  256 << 20,
	MaxEntries:    1_000_000,
	MaxDepth:      256,
	DiffFileBytes: 1 << 20,
	MaxFiles:      10_000,
}

// treeWriter stores a directory's content as git trees and blobs. It
// remembers the blob of each file by what fstat said of the descriptor it
// read (device, inode, size, mtime, ctime, mode), so a second snapshot of a
// large workspace only reads what changed. The memory survives the Audit
// in cacheFile.
type treeWriter struct {
	store     storer.EncodedObjectStorer
	cacheFile string // "" keeps the stat cache in memory only
	limits    Limits
	exclude   gitignore.Matcher // the operator's patterns; nil: none

	mu       sync.Mutex // guards the fields below
	known    map[string]fileStamp
	loaded   bool
	lastRead int64 // content bytes the last walk read
}

// fileStamp is what a file looked like when its blob was stored.
type fileStamp struct {
	Dev, Ino     uint64
	Size         int64
	Mtime, Ctime int64 // nanoseconds
	Mode         uint32
	Hash         plumbing.Hash
}

func stampOf(st *unix.Stat_t) fileStamp {
	return fileStamp{Dev: st.Dev, Ino: st.Ino, Size: st.Size, Mode: st.Mode,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
}

func (s fileStamp) same(o fileStamp) bool {
	s.Hash, o.Hash = plumbing.ZeroHash, plumbing.ZeroHash
	return s == o
}

// errRaced says an entry changed between two looks at it: the caller
// looks again.
var errRaced = errors.New("the entry changed while it was recorded")

// write stores dir and returns its tree hash and notes on what it left
// out. Everything is recorded, .git included, except the operator's
// exclusions: nothing in the workspace (.gitignore, .git/info/exclude)
// decides what the audit sees.
//
// The walk never resolves a path the jail could swap: it holds a
// descriptor of each directory and opens every entry relative to it with
// O_NOFOLLOW, decides on fstat of that descriptor, reads only regular
// files (bounded), reads links with readlinkat on the link itself, and
// stays on the workspace's file system.
func (w *treeWriter) write(ctx context.Context, dir string) (plumbing.Hash, []string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.load()
	// The workspace directory itself is the server's choice, not the jail's.
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return plumbing.ZeroHash, nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return plumbing.ZeroHash, nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	wk := &walk{ctx: ctx, w: w, dev: st.Dev, start: time.Now(), next: map[string]fileStamp{}}
	h, err := wk.dir(fd, nil, 0)
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	w.known, w.lastRead = wk.next, wk.read
	w.save()
	return h, wk.notes(), nil
}

// walk is one pass over a workspace.
type walk struct {
	ctx     context.Context
	w       *treeWriter
	dev     uint64    // the workspace's file system
	start   time.Time // for the racy-timestamp rule in file
	next    map[string]fileStamp
	read    int64 // content bytes read so far
	entries int
	markers int
	skipped map[string][]string // reason → paths (the first few)
	counts  map[string]int      // reason → count
}

// dir records the directory open as fd (which it closes) at rel.
func (wk *walk) dir(fd int, rel []string, depth int) (plumbing.Hash, error) {
	f := os.NewFile(uintptr(fd), path.Join(rel...))
	defer f.Close()
	var tree object.Tree
	for {
		names, rerr := f.Readdirnames(1024)
		for _, name := range names {
			if err := wk.ctx.Err(); err != nil {
				return plumbing.ZeroHash, err
			}
			p := append(rel[:len(rel):len(rel)], name)
			if wk.entries >= wk.w.limits.MaxEntries {
				wk.skip("over the limit of entries per walk", p)
				continue
			}
			e, ok, err := wk.entry(fd, p, depth)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			if ok {
				tree.Entries = append(tree.Entries, e)
			}
		}
		if errors.Is(rerr, io.EOF) || len(names) == 0 {
			break
		}
		if rerr != nil {
			return plumbing.ZeroHash, fmt.Errorf("read directory %q: %w", path.Join(rel...), rerr)
		}
	}
	// git orders entries as if directories had a trailing slash.
	sort.Slice(tree.Entries, func(i, j int) bool { return sortKey(tree.Entries[i]) < sortKey(tree.Entries[j]) })
	obj := wk.w.store.NewEncodedObject()
	if err := tree.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	if wk.w.store.HasEncodedObject(obj.Hash()) == nil {
		return obj.Hash(), nil // unchanged since an earlier walk
	}
	return wk.w.store.SetEncodedObject(obj)
}

// entry records the entry p in the directory open as dirfd. An entry that
// keeps changing under the walk is left out, and said so.
func (wk *walk) entry(dirfd int, p []string, depth int) (object.TreeEntry, bool, error) {
	for range 3 {
		e, ok, err := wk.try(dirfd, p, depth)
		if !errors.Is(err, errRaced) {
			return e, ok, err
		}
	}
	wk.skip("changed while being recorded", p)
	return object.TreeEntry{}, false, nil
}

func (wk *walk) try(dirfd int, p []string, depth int) (object.TreeEntry, bool, error) {
	name := p[len(p)-1]
	// O_PATH opens nothing for real: no FIFO blocks, no device wakes up.
	pfd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return object.TreeEntry{}, false, nil // gone since readdir
	}
	if err != nil {
		wk.skip("unreadable", p)
		return object.TreeEntry{}, false, nil
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		wk.skip("unreadable", p)
		return object.TreeEntry{}, false, nil
	}
	if st.Dev != wk.dev {
		wk.skip("on another file system", p)
		return object.TreeEntry{}, false, nil
	}
	kind := st.Mode & unix.S_IFMT
	if wk.w.exclude != nil && wk.w.exclude.Match(p, kind == unix.S_IFDIR) {
		return object.TreeEntry{}, false, nil
	}
	wk.entries++
	switch kind {
	case unix.S_IFLNK:
		// The link itself, through its own descriptor: never what it names.
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(pfd, "", buf)
		if err != nil {
			wk.skip("unreadable", p)
			return object.TreeEntry{}, false, nil
		}
		h, _, err := wk.w.storeBlob(int64(n), func(wr io.Writer) (bool, error) { _, err := wr.Write(buf[:n]); return true, err })
		return object.TreeEntry{Name: name, Mode: filemode.Symlink, Hash: h}, err == nil, err
	case unix.S_IFDIR:
		if depth >= wk.w.limits.MaxDepth {
			wk.skip("nested too deep", p)
			return object.TreeEntry{}, false, nil
		}
		// "." from the directory's own descriptor is that very directory.
		dfd, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			wk.skip("unreadable", p)
			return object.TreeEntry{}, false, nil
		}
		h, err := wk.dir(dfd, p, depth+1)
		if err != nil || h == emptyTree {
			return object.TreeEntry{}, false, err // git does not track empty directories
		}
		return object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h}, true, nil
	case unix.S_IFREG:
		h, err := wk.file(dirfd, p, &st)
		if err != nil {
			return object.TreeEntry{}, false, err
		}
		mode := filemode.Regular
		if st.Mode&0o111 != 0 {
			mode = filemode.Executable
		}
		return object.TreeEntry{Name: name, Mode: mode, Hash: h}, true, nil
	}
	wk.skip("socket, FIFO or device", p)
	return object.TreeEntry{}, false, nil
}

// file stores the regular file p (st: fstat of its O_PATH descriptor).
func (wk *walk) file(dirfd int, p []string, st *unix.Stat_t) (plumbing.Hash, error) {
	rel := path.Join(p...)
	if old, ok := wk.w.known[rel]; ok && old.same(stampOf(st)) {
		wk.next[rel] = old
		return old.Hash, nil
	}
	lim := wk.w.limits
	if st.Size > lim.MaxFileBytes {
		return wk.marker(rel, st, fmt.Sprintf("over the per-file cap of %d bytes", lim.MaxFileBytes), true)
	}
	if wk.read+st.Size > lim.MaxReadBytes {
		return wk.marker(rel, st, fmt.Sprintf("over the cap of %d bytes read per walk", lim.MaxReadBytes), false)
	}
	// O_PATH descriptors cannot be read: open the name again, and make
	// sure it is still the same file. O_NONBLOCK: even if it is a FIFO
	// by now, the open does not wait.
	fd, err := unix.Openat(dirfd, p[len(p)-1], unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENXIO) {
		return plumbing.ZeroHash, errRaced
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("snapshot %s: %w", rel, err)
	}
	defer unix.Close(fd)
	var rst unix.Stat_t
	if err := unix.Fstat(fd, &rst); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("snapshot %s: %w", rel, err)
	}
	if rst.Dev != st.Dev || rst.Ino != st.Ino || rst.Mode&unix.S_IFMT != unix.S_IFREG || rst.Size > lim.MaxFileBytes {
		return plumbing.ZeroHash, errRaced
	}
	h, complete, err := wk.w.storeFile(fd, rst.Size)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("snapshot %s: %w", rel, err)
	}
	wk.read += rst.Size
	// Remember the blob only if the file held still while it was read,
	// and its ctime is old enough that a later change cannot share it
	// (timestamps are coarse: the same tick can hold two writes).
	var after unix.Stat_t
	stamp := stampOf(&rst)
	if complete && unix.Fstat(fd, &after) == nil && stampOf(&after).same(stamp) &&
		wk.start.Sub(time.Unix(0, stamp.Ctime)) > racyWindow {
		stamp.Hash = h
		wk.next[rel] = stamp
	}
	return h, nil
}

// marker stores, instead of a file's content, a line naming its size and
// change time, so that a change to a large file still shows.
func (wk *walk) marker(rel string, st *unix.Stat_t, why string, remember bool) (plumbing.Hash, error) {
	wk.markers++
	text := fmt.Sprintf("%s %d bytes, changed %s, content not recorded: %s\n", markerPrefix, st.Size,
		time.Unix(0, st.Ctim.Nano()).UTC().Format(time.RFC3339Nano), why)
	h, _, err := wk.w.storeBlob(int64(len(text)), func(wr io.Writer) (bool, error) { _, err := io.WriteString(wr, text); return true, err })
	if err == nil && remember {
		stamp := stampOf(st)
		stamp.Hash = h
		wk.next[rel] = stamp
	}
	return h, err
}

// racyWindow: a file changed this recently before a walk may change again
// within the same timestamp tick, so its stamp is not trusted next time.
var racyWindow = 2 * time.Second

// markerPrefix starts the blob recorded for a file whose content was not.
// A jail could write the same text in a file of its own: it would only
// misstate that file's size, and hide nothing.
const markerPrefix = "warren-audit: large file:"

// parseMarker reads a marker blob: the file's size and why its content
// was not recorded.
func parseMarker(text string) (size int64, why string, ok bool) {
	rest, ok := strings.CutPrefix(text, markerPrefix)
	if !ok {
		return 0, "", false
	}
	if _, err := fmt.Sscanf(rest, " %d bytes", &size); err != nil {
		return 0, "", false
	}
	_, why, ok = strings.Cut(strings.TrimSpace(rest), "content not recorded: ")
	return size, "content not recorded: " + why, ok
}

func (wk *walk) skip(reason string, p []string) {
	if wk.counts == nil {
		wk.counts, wk.skipped = map[string]int{}, map[string][]string{}
	}
	wk.counts[reason]++
	if len(wk.skipped[reason]) < 3 {
		wk.skipped[reason] = append(wk.skipped[reason], path.Join(p...))
	}
}

// notes says what the walk left out.
func (wk *walk) notes() []string {
	var out []string
	if wk.markers > 0 {
		out = append(out, fmt.Sprintf("%d large files recorded by size only", wk.markers))
	}
	reasons := make([]string, 0, len(wk.counts))
	for r := range wk.counts {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		out = append(out, fmt.Sprintf("%d entries left out (%s), e.g. %q", wk.counts[r], r, wk.skipped[r]))
	}
	return out
}

// emptyTree is the hash of git's empty tree.
var emptyTree = plumbing.NewHash("4b825dc642cb6eb9a060e54bf8d69288fbee4904")

func sortKey(e object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}
