package workspace

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// treeWriter stores a directory's content as git trees and blobs. It
// remembers the blob of each file by size, mode and mtime, so a second
// snapshot of a large workspace only reads what changed.
type treeWriter struct {
	store storer.EncodedObjectStorer

	mu    sync.Mutex // guards known
	known map[string]fileStamp
}

type fileStamp struct {
	size  int64
	mtime time.Time
	mode  os.FileMode
	hash  plumbing.Hash
}

// write stores dir and returns its tree hash. .git directories and paths
// ignored by the workspace's .gitignore files are left out; untracked files
// are in.
func (w *treeWriter) write(ctx context.Context, dir string) (plumbing.Hash, error) {
	patterns, _ := gitignore.ReadPatterns(osfs.New(dir), nil)
	m := gitignore.NewMatcher(patterns)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.known == nil {
		w.known = map[string]fileStamp{}
	}
	return w.writeDir(ctx, dir, nil, m)
}

func (w *treeWriter) writeDir(ctx context.Context, root string, rel []string, m gitignore.Matcher) (plumbing.Hash, error) {
	if err := ctx.Err(); err != nil {
		return plumbing.ZeroHash, err
	}
	full := filepath.Join(append([]string{root}, rel...)...)
	entries, err := os.ReadDir(full)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read %s: %w", full, err)
	}
	var tree object.Tree
	for _, e := range entries {
		name := e.Name()
		if name == ".git" {
			continue
		}
		p := append(append([]string(nil), rel...), name)
		if m.Match(p, e.IsDir()) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // vanished while we walked
		}
		var entry object.TreeEntry
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(filepath.Join(full, name))
			if err != nil {
				continue
			}
			h, err := w.storeBlob(func(wr io.Writer) error { _, err := io.WriteString(wr, target); return err }, int64(len(target)))
			if err != nil {
				return plumbing.ZeroHash, err
			}
			entry = object.TreeEntry{Name: name, Mode: filemode.Symlink, Hash: h}
		case info.IsDir():
			h, err := w.writeDir(ctx, root, p, m)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			if h == emptyTree {
				continue // git does not track empty directories
			}
			entry = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h}
		case info.Mode().IsRegular():
			h, err := w.fileBlob(filepath.Join(full, name), path.Join(p...), info)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			mode := filemode.Regular
			if info.Mode()&0o111 != 0 {
				mode = filemode.Executable
			}
			entry = object.TreeEntry{Name: name, Mode: mode, Hash: h}
		default:
			continue // sockets, fifos, devices: not content
		}
		tree.Entries = append(tree.Entries, entry)
	}
	// git orders entries as if directories had a trailing slash.
	sort.Slice(tree.Entries, func(i, j int) bool { return sortKey(tree.Entries[i]) < sortKey(tree.Entries[j]) })
	obj := w.store.NewEncodedObject()
	if err := tree.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return w.store.SetEncodedObject(obj)
}

// emptyTree is the hash of git's empty tree.
var emptyTree = plumbing.NewHash("4b825dc642cb6eb9a060e54bf8d69288fbee4904")

func sortKey(e object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}

// fileBlob stores a file's content unless the same size, mode and mtime
// were stored before.
func (w *treeWriter) fileBlob(full, rel string, info os.FileInfo) (plumbing.Hash, error) {
	if st, ok := w.known[rel]; ok && st.size == info.Size() && st.mtime.Equal(info.ModTime()) && st.mode == info.Mode() {
		return st.hash, nil
	}
	f, err := os.Open(full)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("snapshot %s: %w", rel, err)
	}
	defer f.Close()
	h, err := w.storeBlob(func(wr io.Writer) error { _, err := io.Copy(wr, f); return err }, info.Size())
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("snapshot %s: %w", rel, err)
	}
	w.known[rel] = fileStamp{size: info.Size(), mtime: info.ModTime(), mode: info.Mode(), hash: h}
	return h, nil
}

func (w *treeWriter) storeBlob(fill func(io.Writer) error, size int64) (plumbing.Hash, error) {
	obj := w.store.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(size)
	wr, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := fill(wr); err != nil {
		wr.Close()
		return plumbing.ZeroHash, err
	}
	if err := wr.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	if w.store.HasEncodedObject(obj.Hash()) == nil {
		return obj.Hash(), nil
	}
	return w.store.SetEncodedObject(obj)
}
