package gitpush

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/sessions/workspace"
)

// merger applies what changed in the workspace between the audit base
// (the workspace as cloned) and the snapshot (the workspace now) onto the
// cloned commit's tree. Paths the audit leaves out (the operator's
// exclusions) are then kept as the remote has them, and every .git entry
// is dropped: the workspace's repository metadata is the jail's, never
// part of what is pushed.
type merger struct {
	st      storer.EncodedObjectStorer
	changed int
}

// maxMarker is more than any marker blob's size.
const maxMarker = 512

func isGitDir(name string) bool { return strings.EqualFold(name, ".git") }

func (m *merger) tree(h plumbing.Hash) (map[string]object.TreeEntry, error) {
	out := map[string]object.TreeEntry{}
	if h.IsZero() {
		return out, nil
	}
	t, err := object.GetTree(m.st, h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	for _, e := range t.Entries {
		out[e.Name] = e
	}
	return out, nil
}

// merge returns the tree of up with the changes from base to snap. Zero
// hashes are empty trees.
func (m *merger) merge(up, base, snap plumbing.Hash, dir string) (plumbing.Hash, error) {
	u, err := m.tree(up)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	b, err := m.tree(base)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	s, err := m.tree(snap)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	names := map[string]bool{}
	for n := range b {
		names[n] = true
	}
	for n := range s {
		names[n] = true
	}
	for n := range names {
		if isGitDir(n) {
			continue
		}
		be, inB := b[n]
		se, inS := s[n]
		if inB && inS && be.Hash == se.Hash && be.Mode == se.Mode {
			continue // unchanged: the remote's entry stands
		}
		p := dir + n
		switch {
		case !inS:
			if _, ok := u[n]; ok {
				delete(u, n)
				m.changed++
			}
		case se.Mode == filemode.Dir:
			var ub, bb plumbing.Hash
			if ue, ok := u[n]; ok && ue.Mode == filemode.Dir {
				ub = ue.Hash
			}
			if inB && be.Mode == filemode.Dir {
				bb = be.Hash
			}
			h, err := m.merge(ub, bb, se.Hash, p+"/")
			if err != nil {
				return plumbing.ZeroHash, err
			}
			if h.IsZero() {
				delete(u, n)
			} else {
				u[n] = object.TreeEntry{Name: n, Mode: filemode.Dir, Hash: h}
			}
		default:
			if err := m.checkBlob(se, p); err != nil {
				return plumbing.ZeroHash, err
			}
			u[n] = se
			m.changed++
		}
	}
	if len(u) == 0 {
		return plumbing.ZeroHash, nil
	}
	return m.write(u)
}

// checkBlob refuses a file whose content the snapshot did not keep.
func (m *merger) checkBlob(e object.TreeEntry, path string) error {
	o, err := m.st.EncodedObject(plumbing.BlobObject, e.Hash)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if o.Size() > maxMarker {
		return nil
	}
	r, err := o.Reader()
	if err != nil {
		return err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if workspace.IsMarker(b) {
		return errs.New(errs.Limit, fmt.Sprintf("%s is larger than the snapshots' per-file limit, so its content "+
			"was not recorded and cannot be pushed: make it smaller, or leave it out of the workspace", path))
	}
	return nil
}

func (m *merger) write(entries map[string]object.TreeEntry) (plumbing.Hash, error) {
	t := &object.Tree{}
	for _, e := range entries {
		t.Entries = append(t.Entries, e)
	}
	// git orders a tree's entries by name, a directory's as if it ended in "/".
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(t.Entries, func(i, j int) bool { return key(t.Entries[i]) < key(t.Entries[j]) })
	obj := m.st.NewEncodedObject()
	if err := t.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return m.st.SetEncodedObject(obj)
}

// missing lists the trees and blobs reachable from tree that the tree
// have does not already hold: what a pack built on have must carry.
func missing(st storer.EncodedObjectStorer, tree, have plumbing.Hash) ([]plumbing.Hash, error) {
	known := map[plumbing.Hash]bool{}
	if !have.IsZero() {
		if err := walk(st, have, func(h plumbing.Hash) bool { known[h] = true; return true }); err != nil {
			return nil, err
		}
	}
	var out []plumbing.Hash
	err := walk(st, tree, func(h plumbing.Hash) bool {
		if known[h] {
			return false
		}
		known[h] = true
		out = append(out, h)
		return true
	})
	return out, err
}

// walk calls fn for tree and every tree and blob under it, descending into
// a tree only when fn returns true.
func walk(st storer.EncodedObjectStorer, tree plumbing.Hash, fn func(plumbing.Hash) bool) error {
	if !fn(tree) {
		return nil
	}
	t, err := object.GetTree(st, tree)
	if err != nil {
		return fmt.Errorf("read tree %s: %w", tree, err)
	}
	for _, e := range t.Entries {
		switch e.Mode {
		case filemode.Submodule:
		case filemode.Dir:
			if err := walk(st, e.Hash, fn); err != nil {
				return err
			}
		default:
			fn(e.Hash)
		}
	}
	return nil
}
