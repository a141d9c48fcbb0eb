package workspace

import (
	"bytes"
	"context"
	"io"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	fdiff "github.com/go-git/go-git/v5/plumbing/format/diff"
	"github.com/go-git/go-git/v5/utils/diff"
	dmp "github.com/sergi/go-diff/diffmatchpatch"
)

// filePatch is one change as go-git's unified encoder wants it. It is
// built from blob hashes, not through object.Change.Patch, which refuses
// paths it would not check out (".git/hooks/pre-commit", names with a
// backslash): the audit must show exactly those.
type filePatch struct {
	from, to fdiff.File // nil for the missing side
	chunks   []fdiff.Chunk
	binary   bool
}

func (p *filePatch) IsBinary() bool                  { return p.binary }
func (p *filePatch) Files() (fdiff.File, fdiff.File) { return p.from, p.to }
func (p *filePatch) Chunks() []fdiff.Chunk           { return p.chunks }

// onePatch is a Patch of one file.
type onePatch struct{ fp *filePatch }

func (p onePatch) FilePatches() []fdiff.FilePatch { return []fdiff.FilePatch{p.fp} }
func (p onePatch) Message() string                { return "" }

type patchFile struct {
	hash plumbing.Hash
	mode filemode.FileMode
	path string
}

func (f patchFile) Hash() plumbing.Hash     { return f.hash }
func (f patchFile) Mode() filemode.FileMode { return f.mode }
func (f patchFile) Path() string            { return f.path }

type chunk struct {
	text string
	op   fdiff.Operation
}

func (c chunk) Content() string       { return c.text }
func (c chunk) Type() fdiff.Operation { return c.op }

// diffTimeout bounds the CPU one file's line diff may take; past it the
// rest of the file shows as deleted and added, which is still true.
const diffTimeout = 5 * time.Second

// linePatch compares the two sides of a change line by line. Both sides
// are at most Limits.DiffFileBytes: the caller checked.
func (a *Audit) linePatch(ctx context.Context, ch change) (*filePatch, error) {
	fp := &filePatch{}
	var texts [2]string
	for i, e := range []side{ch.from, ch.to} {
		if e.path == "" {
			continue
		}
		f := patchFile{hash: e.hash, mode: e.mode, path: e.path}
		if i == 0 {
			fp.from = f
		} else {
			fp.to = f
		}
		b, err := a.readBlob(e.hash)
		if err != nil {
			return nil, err
		}
		// Binary as git decides it: a NUL in the first 8000 bytes.
		if bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
			fp.binary = true
		}
		texts[i] = string(b)
	}
	if fp.binary || texts[0] == texts[1] {
		return fp, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, d := range diff.DoWithTimeout(texts[0], texts[1], diffTimeout) {
		op := fdiff.Equal
		switch d.Type {
		case dmp.DiffDelete:
			op = fdiff.Delete
		case dmp.DiffInsert:
			op = fdiff.Add
		}
		fp.chunks = append(fp.chunks, chunk{d.Text, op})
	}
	return fp, nil
}

// lineCounts counts the added and deleted lines of a patch.
func lineCounts(fp *filePatch) (add, del int) {
	for _, c := range fp.chunks {
		s := c.Content()
		if s == "" {
			continue
		}
		n := strings.Count(s, "\n")
		if !strings.HasSuffix(s, "\n") {
			n++
		}
		switch c.Type() {
		case fdiff.Add:
			add += n
		case fdiff.Delete:
			del += n
		}
	}
	return add, del
}

func (a *Audit) readBlob(h plumbing.Hash) ([]byte, error) {
	blob, err := a.repo.BlobObject(h)
	if err != nil {
		return nil, err
	}
	r, err := blob.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, a.tw.limits.DiffFileBytes+1))
}
