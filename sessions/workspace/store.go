package workspace

import (
	"bufio"
	"encoding/gob"
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
)

// statCacheFile, inside the audit repository, keeps the stat cache between
// the Audits the session manager opens, one per call.
const statCacheFile = "warren-stat-cache"

// load reads the stat cache once; a missing or unreadable one is empty
// (the next walk reads every file again, nothing worse).
func (w *treeWriter) load() {
	if w.loaded {
		return
	}
	w.loaded, w.known = true, map[string]fileStamp{}
	if w.cacheFile == "" {
		return
	}
	f, err := os.Open(w.cacheFile)
	if err != nil {
		return
	}
	defer f.Close()
	var known map[string]fileStamp
	if gob.NewDecoder(bufio.NewReader(f)).Decode(&known) == nil {
		w.known = known
	}
}

// save writes the stat cache whole, through a temporary file, so a crash
// leaves the old one or the new one. Failing to save only costs reads.
func (w *treeWriter) save() {
	if w.cacheFile == "" {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(w.cacheFile), statCacheFile+".*")
	if err != nil {
		return
	}
	bw := bufio.NewWriter(tmp)
	err = gob.NewEncoder(bw).Encode(w.known)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), w.cacheFile)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
}

// lazyWriter is go-git's filesystem object storage: it streams a loose
// object to disk, where NewEncodedObject would hold it whole in memory.
type lazyWriter interface {
	LazyWriter() (io.WriteCloser, func(plumbing.ObjectType, int64) error, error)
}

// storeBlob stores a blob of exactly size bytes that fill writes. fill
// reports whether it wrote all of them; if it wrote fewer, the rest is
// zeros, so the object is always well formed.
func (w *treeWriter) storeBlob(size int64, fill func(io.Writer) (bool, error)) (plumbing.Hash, bool, error) {
	lw, ok := w.store.(lazyWriter)
	if !ok {
		return w.storeMemoryBlob(size, fill)
	}
	wc, header, err := lw.LazyWriter()
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	cw := &countingWriter{w: wc, max: size}
	complete := false
	if err = header(plumbing.BlobObject, size); err == nil {
		complete, err = fill(cw)
		if err == nil {
			err = cw.pad()
		}
	}
	if cerr := wc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	hasher, ok := wc.(interface{ Hash() plumbing.Hash })
	if !ok {
		return plumbing.ZeroHash, false, errors.New("store blob: the object writer does not report hashes")
	}
	return hasher.Hash(), complete, nil
}

// storeMemoryBlob is storeBlob for storages without a streaming writer.
func (w *treeWriter) storeMemoryBlob(size int64, fill func(io.Writer) (bool, error)) (plumbing.Hash, bool, error) {
	obj := w.store.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(size)
	wr, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	cw := &countingWriter{w: wr, max: size}
	complete, err := fill(cw)
	if err == nil {
		err = cw.pad()
	}
	if cerr := wr.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	h, err := w.store.SetEncodedObject(obj)
	return h, complete, err
}

// countingWriter passes at most max bytes on, and can pad up to max.
type countingWriter struct {
	w      io.Writer
	n, max int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if rest := c.max - c.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) pad() error {
	var zeros [4096]byte
	for c.n < c.max {
		k := min(int64(len(zeros)), c.max-c.n)
		if _, err := c.Write(zeros[:k]); err != nil {
			return err
		}
	}
	return nil
}

// smallFile is the size up to which storeContent reads a file into
// memory first, to skip writing a blob the repository already has (most
// source files, sent again because they changed too recently to be
// trusted).
const smallFile = 64 << 10

// storeContent stores exactly size bytes of r (a file's content in a tree
// stream) as a blob.
func (w *treeWriter) storeContent(r io.Reader, size int64) (plumbing.Hash, error) {
	if size > smallFile {
		h, _, err := w.storeBlob(size, func(wr io.Writer) (bool, error) {
			_, err := io.CopyN(wr, r, size)
			return err == nil, err
		})
		return h, err
	}
	content := make([]byte, size)
	if _, err := io.ReadFull(r, content); err != nil {
		return plumbing.ZeroHash, err
	}
	if h := plumbing.ComputeHash(plumbing.BlobObject, content); w.store.HasEncodedObject(h) == nil {
		return h, nil
	}
	h, _, err := w.storeBlob(size, func(wr io.Writer) (bool, error) { _, err := wr.Write(content); return true, err })
	return h, err
}
