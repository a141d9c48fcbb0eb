package proto

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strings"
)

// The tree operations: the workspace as the jail sees it, for snapshots,
// diffs and the disk quota.
const (
	// OpTree streams a directory's tree as tree records (TreeArgs,
	// TreeResult). Input: the keys (StampKey) of the files the server
	// already has, 8 bytes each, big-endian; a file whose key is among them
	// is sent without its content.
	OpTree = "tree"
	// OpDiskUsage measures directories like du -x (DiskUsageArgs,
	// DiskUsageResult).
	OpDiskUsage = "du"
)

// TreeArgs are the arguments of OpTree.
type TreeArgs struct {
	// Root is the directory to walk, as the jail sees it (/workspace).
	Root string `json:"root"`
	// Prune names entries not to walk into or list: the operator's
	// exclusions that a name alone decides. The server filters what it
	// receives with all of them anyway.
	Prune []Prune `json:"prune,omitempty"`
	// MaxEntries caps the records (entries and skips) of the stream.
	MaxEntries int `json:"max_entries"`
	// MaxDepth caps how deep the walk descends.
	MaxDepth int `json:"max_depth"`
	// MaxFileBytes: a larger regular file is sent without its content.
	MaxFileBytes int64 `json:"max_file_bytes"`
	// MaxReadBytes caps the content bytes of the whole stream.
	MaxReadBytes int64 `json:"max_read_bytes"`
}

// MaxPrune bounds TreeArgs.Prune.
const MaxPrune = 256

// Prune is one name pattern (path.Match syntax) of TreeArgs.Prune.
type Prune struct {
	Glob    string `json:"glob"`
	DirOnly bool   `json:"dir_only,omitempty"`
}

// TreeResult is the result of OpTree.
type TreeResult struct {
	// Left is how many entries were left out past MaxEntries.
	Left int64 `json:"left"`
}

// DiskUsageArgs are the arguments of OpDiskUsage: at most 8 directories,
// as the jail sees them.
type DiskUsageArgs struct {
	Dirs []string `json:"dirs"`
}

// DiskUsageResult is the result of OpDiskUsage: for each directory the
// bytes allocated beneath it, and why that figure is only a lower bound
// ("" when it is exact; "missing" when the directory does not exist).
type DiskUsageResult struct {
	Bytes  []int64  `json:"bytes"`
	Errors []string `json:"errors"`
}

// The kinds of tree record. A stream is the records of the root's entries,
// depth first; a directory's entries come in strictly increasing byte
// order of their names, between its RecDir and its RecEnd.
const (
	RecDir  = 'd' // name: a directory begins
	RecEnd  = 'e' // the directory last begun ends
	RecFile = 'f' // name, stamp, content flag (and content)
	RecLink = 'l' // name, target
	RecSkip = 's' // name, reason: an entry left out
)

// The content flags of a RecFile.
const (
	// ContentKnown: the file's key was in the server's input; no content.
	ContentKnown = 0
	// ContentSent: exactly Stamp.Size bytes follow, then one byte: 1 if
	// the file held still (and gave all its bytes) while it was read.
	ContentSent = 1
	// ContentWithheld: over MaxFileBytes or the stream's MaxReadBytes.
	ContentWithheld = 2
)

// The reasons of a RecSkip.
const (
	SkipOtherFS    = 1 // a mount point
	SkipSpecial    = 2 // a socket, FIFO or device
	SkipUnreadable = 3
	SkipTooDeep    = 4
	SkipRaced      = 5 // kept changing while it was read
)

// MaxSkipReason is the largest reason a RecSkip may carry.
const MaxSkipReason = SkipRaced

// Limits of one record, whatever the arguments.
const (
	MaxNameBytes   = 255
	MaxTargetBytes = 4095
)

// Stamp is what a file looked like when it was read: enough to tell a
// changed file from an unchanged one without reading it.
type Stamp struct {
	Mode         uint32
	Size         int64
	Dev, Ino     uint64
	Mtime, Ctime int64 // nanoseconds
}

const stampLen = 4 + 8 + 8 + 8 + 8 + 8

// StampKey is the key of the file at rel (slash-separated, relative to
// the root) with stamp st, as the server sends it in OpTree's input.
func StampKey(rel string, st Stamp) uint64 {
	h := fnv.New64a()
	h.Write([]byte(rel))
	var b [1 + stampLen]byte
	h.Write(appendStamp(b[:1], st))
	return h.Sum64()
}

func appendStamp(b []byte, st Stamp) []byte {
	b = binary.BigEndian.AppendUint32(b, st.Mode)
	b = binary.BigEndian.AppendUint64(b, uint64(st.Size))
	b = binary.BigEndian.AppendUint64(b, st.Dev)
	b = binary.BigEndian.AppendUint64(b, st.Ino)
	b = binary.BigEndian.AppendUint64(b, uint64(st.Mtime))
	return binary.BigEndian.AppendUint64(b, uint64(st.Ctime))
}

func appendName(b []byte, name string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(name)))
	return append(b, name...)
}

// AppendDir appends a RecDir record.
func AppendDir(b []byte, name string) []byte { return appendName(append(b, RecDir), name) }

// AppendEnd appends a RecEnd record.
func AppendEnd(b []byte) []byte { return append(b, RecEnd) }

// AppendLink appends a RecLink record.
func AppendLink(b []byte, name, target string) []byte {
	return appendName(appendName(append(b, RecLink), name), target)
}

// AppendSkip appends a RecSkip record.
func AppendSkip(b []byte, name string, reason byte) []byte {
	return append(appendName(append(b, RecSkip), name), reason)
}

// AppendFile appends a RecFile record up to its content flag; with
// ContentSent the caller writes the content and the held-still byte.
func AppendFile(b []byte, name string, st Stamp, flag byte) []byte {
	return append(appendStamp(appendName(append(b, RecFile), name), st), flag)
}

// TreeLimits bound what a TreeReader accepts. The stream comes from a
// jail: a reader that hits a limit fails, it never holds more.
type TreeLimits struct {
	MaxEntries   int
	MaxDepth     int
	MaxFileBytes int64
	MaxReadBytes int64
}

// ErrTree is wrapped by every error a TreeReader returns for a stream
// that breaks the format or its limits.
var ErrTree = errors.New("the runner's tree stream is malformed")

func treeErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrTree, fmt.Sprintf(format, args...))
}

// TreeRecord is one record as a TreeReader returns it.
type TreeRecord struct {
	Kind   byte
	Name   string
	Target string // RecLink
	Reason byte   // RecSkip
	Stamp  Stamp  // RecFile
	Flag   byte   // RecFile
	// Content is a RecFile's content with ContentSent: exactly Stamp.Size
	// bytes, to read before the next call to Next (or EndContent).
	Content io.Reader
}

// TreeReader reads tree records from a stream the server must not trust:
// every name is one path component (no "/", NUL, "." or ".."), names in a
// directory strictly increase (no duplicates), and depth, entries and
// content sizes stay within the limits.
type TreeReader struct {
	r       *bufio.Reader
	lim     TreeLimits
	last    []string // the last name at each open depth; last[0] is the root's
	entries int
	read    int64
	content *io.LimitedReader // the current file's content, until EndContent
	buf     []byte
}

// NewTreeReader reads records from r within lim.
func NewTreeReader(r io.Reader, lim TreeLimits) *TreeReader {
	return &TreeReader{r: bufio.NewReaderSize(r, 64<<10), lim: lim, last: []string{""}, buf: make([]byte, 0, MaxTargetBytes+1)}
}

// Depth is how many directories are open (0 at the root).
func (t *TreeReader) Depth() int { return len(t.last) - 1 }

// Next returns the next record, or io.EOF at a well-formed end.
func (t *TreeReader) Next() (TreeRecord, error) {
	if t.content != nil {
		if _, err := t.EndContent(); err != nil {
			return TreeRecord{}, err
		}
	}
	kind, err := t.r.ReadByte()
	if errors.Is(err, io.EOF) {
		if t.Depth() != 0 {
			return TreeRecord{}, treeErrorf("it ends inside a directory")
		}
		return TreeRecord{}, io.EOF
	}
	if err != nil {
		return TreeRecord{}, err
	}
	rec := TreeRecord{Kind: kind}
	if kind == RecEnd {
		if t.Depth() == 0 {
			return TreeRecord{}, treeErrorf("it ends a directory it did not begin")
		}
		t.last = t.last[:len(t.last)-1]
		return rec, nil
	}
	switch kind {
	case RecDir, RecFile, RecLink, RecSkip:
	default:
		return TreeRecord{}, treeErrorf("a record of kind %d", kind)
	}
	if t.entries++; t.entries > t.lim.MaxEntries {
		return TreeRecord{}, treeErrorf("more than %d entries", t.lim.MaxEntries)
	}
	if rec.Name, err = t.name(); err != nil {
		return TreeRecord{}, err
	}
	switch kind {
	case RecDir:
		if t.Depth() >= t.lim.MaxDepth {
			return TreeRecord{}, treeErrorf("directories nested deeper than %d", t.lim.MaxDepth)
		}
		t.last = append(t.last, "")
	case RecLink:
		if rec.Target, err = t.str(MaxTargetBytes); err != nil {
			return TreeRecord{}, err
		}
		if rec.Target == "" || strings.IndexByte(rec.Target, 0) >= 0 {
			return TreeRecord{}, treeErrorf("a link with an empty target or a NUL in it")
		}
	case RecSkip:
		if rec.Reason, err = t.r.ReadByte(); err != nil {
			return TreeRecord{}, t.short(err)
		}
		if rec.Reason < 1 || rec.Reason > MaxSkipReason {
			return TreeRecord{}, treeErrorf("a skip of reason %d", rec.Reason)
		}
	case RecFile:
		if err := t.file(&rec); err != nil {
			return TreeRecord{}, err
		}
	}
	return rec, nil
}

func (t *TreeReader) file(rec *TreeRecord) error {
	b := t.buf[:stampLen+1]
	if _, err := io.ReadFull(t.r, b); err != nil {
		return t.short(err)
	}
	st := Stamp{Mode: binary.BigEndian.Uint32(b), Size: int64(binary.BigEndian.Uint64(b[4:])),
		Dev: binary.BigEndian.Uint64(b[12:]), Ino: binary.BigEndian.Uint64(b[20:]),
		Mtime: int64(binary.BigEndian.Uint64(b[28:])), Ctime: int64(binary.BigEndian.Uint64(b[36:]))}
	rec.Stamp, rec.Flag = st, b[stampLen]
	if st.Size < 0 {
		return treeErrorf("a file of %d bytes", st.Size)
	}
	switch rec.Flag {
	case ContentKnown, ContentWithheld:
		return nil
	case ContentSent:
	default:
		return treeErrorf("a content flag of %d", rec.Flag)
	}
	if st.Size > t.lim.MaxFileBytes {
		return treeErrorf("content of %d bytes, over the per-file cap of %d", st.Size, t.lim.MaxFileBytes)
	}
	if t.read+st.Size > t.lim.MaxReadBytes {
		return treeErrorf("more content than the cap of %d bytes", t.lim.MaxReadBytes)
	}
	t.read += st.Size
	t.content = &io.LimitedReader{R: t.r, N: st.Size}
	rec.Content = t.content
	return nil
}

// EndContent skips what is left of the current file's content and reads
// whether the file held still while the runner read it.
func (t *TreeReader) EndContent() (bool, error) {
	if t.content == nil {
		return false, nil
	}
	if _, err := io.Copy(io.Discard, t.content); err != nil {
		return false, err
	}
	if t.content.N > 0 {
		return false, treeErrorf("it ends inside a file's content")
	}
	t.content = nil
	still, err := t.r.ReadByte()
	if err != nil {
		return false, t.short(err)
	}
	if still > 1 {
		return false, treeErrorf("a held-still byte of %d", still)
	}
	return still == 1, nil
}

// name reads one entry's name and checks it against the directory's last.
func (t *TreeReader) name() (string, error) {
	n, err := t.str(MaxNameBytes)
	if err != nil {
		return "", err
	}
	if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\x00") {
		return "", treeErrorf("an entry named %q", Cut(n, 64))
	}
	d := len(t.last) - 1
	if n <= t.last[d] {
		return "", treeErrorf("the entry %q out of order or twice", Cut(n, 64))
	}
	t.last[d] = n
	return n, nil
}

func (t *TreeReader) str(max int) (string, error) {
	var l [2]byte
	if _, err := io.ReadFull(t.r, l[:]); err != nil {
		return "", t.short(err)
	}
	n := int(binary.BigEndian.Uint16(l[:]))
	if n > max {
		return "", treeErrorf("a name or target of %d bytes (the limit is %d)", n, max)
	}
	b := t.buf[:n]
	if _, err := io.ReadFull(t.r, b); err != nil {
		return "", t.short(err)
	}
	return string(b), nil
}

// short turns an end of the stream inside a record into a format error;
// other errors (the runner's own, a cancelled read) pass as they are.
func (t *TreeReader) short(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return treeErrorf("it ends inside a record")
	}
	return err
}
