package workspace

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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

	"github.com/warrenhq/warren/sandbox/runner/proto"
	"github.com/warrenhq/warren/sessions/bound"
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

// treeWriter stores a tree stream (TreeSource) as git trees and blobs. It
// remembers the blob of each file by the stamp the walker took of the
// descriptor it read (device, inode, size, mtime, ctime, mode), and sends
// the walker the keys of those stamps, so a second snapshot of a large
// workspace only carries what changed. The memory survives the Audit in
// cacheFile.
type treeWriter struct {
	store     storer.EncodedObjectStorer
	cacheFile string // "" keeps the stat cache in memory only
	limits    Limits
	exclude   gitignore.Matcher // the operator's patterns; nil: none
	prune     []proto.Prune     // those of them a name alone decides, for the runner

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

func fromStamp(s proto.Stamp) fileStamp {
	return fileStamp{Dev: s.Dev, Ino: s.Ino, Size: s.Size, Mode: s.Mode, Mtime: s.Mtime, Ctime: s.Ctime}
}

func (s fileStamp) stamp() proto.Stamp {
	return proto.Stamp{Dev: s.Dev, Ino: s.Ino, Size: s.Size, Mode: s.Mode, Mtime: s.Mtime, Ctime: s.Ctime}
}

func (s fileStamp) same(o fileStamp) bool {
	s.Hash, o.Hash = plumbing.ZeroHash, plumbing.ZeroHash
	return s == o
}

// write stores the tree src streams and returns its tree hash and notes on
// what it left out. Everything is recorded, .git included, except the
// operator's exclusions: nothing in the workspace (.gitignore,
// .git/info/exclude) decides what the audit sees.
//
// The stream comes from the session's runner, inside its jail: it is read
// within the limits (proto.TreeReader refuses bad names, duplicates, and
// anything past the caps), and turns into git objects in the audit
// repository only; no name in it is ever opened as a path.
func (w *treeWriter) write(ctx context.Context, src TreeSource) (plumbing.Hash, []string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.load()
	lim := w.limits
	// The files whose blobs the audit has: the runner sends them without
	// their content. The cache is bounded like a walk.
	keys := make([]byte, 0, 8*min(len(w.known), lim.MaxEntries))
	for rel, s := range w.known {
		if len(keys) >= 8*lim.MaxEntries {
			break
		}
		keys = binary.BigEndian.AppendUint64(keys, proto.StampKey(rel, s.stamp()))
	}
	args := proto.TreeArgs{Prune: w.prune, MaxEntries: lim.MaxEntries, MaxDepth: lim.MaxDepth,
		MaxFileBytes: lim.MaxFileBytes, MaxReadBytes: lim.MaxReadBytes}
	st, err := src.Tree(ctx, args, keys)
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	defer st.Close()
	b := &build{w: w, start: time.Now(), next: map[string]fileStamp{},
		r: proto.NewTreeReader(st, proto.TreeLimits{MaxEntries: lim.MaxEntries, MaxDepth: lim.MaxDepth,
			MaxFileBytes: lim.MaxFileBytes, MaxReadBytes: lim.MaxReadBytes})}
	h, err := b.run(ctx)
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	res, err := st.Result()
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	if res.Left > 0 {
		b.skip(leftOut, nil)
		b.counts[leftOut] += int(min(res.Left, int64(1<<30))) - 1
	}
	w.known, w.lastRead = b.next, b.read
	w.save()
	return h, b.notes(), nil
}

const leftOut = "over the limit of entries per walk"

var skipReasons = map[byte]string{
	proto.SkipOtherFS:    "on another file system",
	proto.SkipSpecial:    "socket, FIFO or device",
	proto.SkipUnreadable: "unreadable",
	proto.SkipTooDeep:    "nested too deep",
	proto.SkipRaced:      "changed while being recorded",
}

// build is one tree stream turned into git objects.
type build struct {
	w       *treeWriter
	r       *proto.TreeReader
	start   time.Time // for the racy-timestamp rule in file
	next    map[string]fileStamp
	read    int64 // content bytes stored
	markers int
	skipped map[string][]string // reason → paths (the first few)
	counts  map[string]int      // reason → count
}

// dirFrame is a directory of the stream being recorded.
type dirFrame struct {
	path     []string
	entries  []object.TreeEntry
	excluded bool // by the operator's patterns: its records are read and dropped
}

func (b *build) run(ctx context.Context) (plumbing.Hash, error) {
	stack := []*dirFrame{{}}
	for {
		if err := ctx.Err(); err != nil {
			return plumbing.ZeroHash, err
		}
		rec, err := b.r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return plumbing.ZeroHash, err
		}
		top := stack[len(stack)-1]
		if rec.Kind == proto.RecEnd {
			stack = stack[:len(stack)-1]
			if top.excluded {
				continue
			}
			h, err := b.tree(top.entries)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			if h != emptyTree { // git does not track empty directories
				parent := stack[len(stack)-1]
				parent.entries = append(parent.entries, object.TreeEntry{Name: top.path[len(top.path)-1], Mode: filemode.Dir, Hash: h})
			}
			continue
		}
		p := append(top.path[:len(top.path):len(top.path)], rec.Name)
		excluded := top.excluded || b.w.exclude != nil && b.w.exclude.Match(p, rec.Kind == proto.RecDir)
		if rec.Kind == proto.RecDir {
			stack = append(stack, &dirFrame{path: p, excluded: excluded})
			continue
		}
		if excluded {
			continue
		}
		switch rec.Kind {
		case proto.RecSkip:
			b.skip(skipReasons[rec.Reason], p)
		case proto.RecLink:
			target := rec.Target
			h, _, err := b.w.storeBlob(int64(len(target)), func(wr io.Writer) (bool, error) { _, err := io.WriteString(wr, target); return true, err })
			if err != nil {
				return plumbing.ZeroHash, err
			}
			top.entries = append(top.entries, object.TreeEntry{Name: rec.Name, Mode: filemode.Symlink, Hash: h})
		case proto.RecFile:
			h, err := b.file(path.Join(p...), rec)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			mode := filemode.Regular
			if rec.Stamp.Mode&0o111 != 0 {
				mode = filemode.Executable
			}
			top.entries = append(top.entries, object.TreeEntry{Name: rec.Name, Mode: mode, Hash: h})
		}
	}
	return b.tree(stack[0].entries)
}

// tree stores a directory's entries as a git tree.
func (b *build) tree(entries []object.TreeEntry) (plumbing.Hash, error) {
	// git orders entries as if directories had a trailing slash.
	sort.Slice(entries, func(i, j int) bool { return sortKey(entries[i]) < sortKey(entries[j]) })
	tree := object.Tree{Entries: entries}
	obj := b.w.store.NewEncodedObject()
	if err := tree.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	if b.w.store.HasEncodedObject(obj.Hash()) == nil {
		return obj.Hash(), nil // unchanged since an earlier walk
	}
	return b.w.store.SetEncodedObject(obj)
}

// file stores the regular file rel of rec: its content, the blob the
// cache has for it, or a marker naming its size.
func (b *build) file(rel string, rec proto.TreeRecord) (plumbing.Hash, error) {
	stamp := fromStamp(rec.Stamp)
	lim := b.w.limits
	switch rec.Flag {
	case proto.ContentKnown:
		if old, ok := b.w.known[rel]; ok && old.same(stamp) {
			b.next[rel] = old
			return old.Hash, nil
		}
		// Not what the audit has: a runner that lies, or a key that
		// collided. Nothing to store but the size.
		return b.marker(rel, stamp, "the runner did not send it", false)
	case proto.ContentWithheld:
		if stamp.Size > lim.MaxFileBytes {
			return b.marker(rel, stamp, fmt.Sprintf("over the per-file cap of %d bytes", lim.MaxFileBytes), true)
		}
		return b.marker(rel, stamp, fmt.Sprintf("over the cap of %d bytes read per walk", lim.MaxReadBytes), false)
	}
	h, err := b.w.storeContent(rec.Content, stamp.Size)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("snapshot %s: %w", bound.String(rel, bound.Line), err)
	}
	still, err := b.r.EndContent()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	b.read += stamp.Size
	// Remember the blob only if the file held still while it was read,
	// and its ctime is old enough that a later change cannot share it
	// (timestamps are coarse: the same tick can hold two writes).
	if still && b.start.Sub(time.Unix(0, stamp.Ctime)) > racyWindow {
		stamp.Hash = h
		b.next[rel] = stamp
	}
	return h, nil
}

// marker stores, instead of a file's content, a line naming its size and
// change time, so that a change to a large file still shows.
func (b *build) marker(rel string, st fileStamp, why string, remember bool) (plumbing.Hash, error) {
	b.markers++
	text := fmt.Sprintf("%s %d bytes, changed %s, content not recorded: %s\n", markerPrefix, st.Size,
		time.Unix(0, st.Ctime).UTC().Format(time.RFC3339Nano), why)
	h, _, err := b.w.storeBlob(int64(len(text)), func(wr io.Writer) (bool, error) { _, err := io.WriteString(wr, text); return true, err })
	if err == nil && remember {
		st.Hash = h
		b.next[rel] = st
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

func (b *build) skip(reason string, p []string) {
	if b.counts == nil {
		b.counts, b.skipped = map[string]int{}, map[string][]string{}
	}
	b.counts[reason]++
	if len(b.skipped[reason]) < 3 && p != nil {
		b.skipped[reason] = append(b.skipped[reason], bound.String(path.Join(p...), bound.Line))
	}
}

// notes says what the walk left out.
func (b *build) notes() []string {
	var out []string
	if b.markers > 0 {
		out = append(out, fmt.Sprintf("%d large files recorded by size only", b.markers))
	}
	reasons := make([]string, 0, len(b.counts))
	for r := range b.counts {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		if r == leftOut && len(b.skipped[r]) == 0 {
			out = append(out, fmt.Sprintf("%d entries left out (%s)", b.counts[r], r))
			continue
		}
		out = append(out, fmt.Sprintf("%d entries left out (%s), e.g. %q", b.counts[r], r, b.skipped[r]))
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
