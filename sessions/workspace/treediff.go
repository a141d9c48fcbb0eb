package workspace

import (
	"context"
	"path"
	"sort"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// side is one side of a change: a file or symlink in a tree (path ""
// when the change adds or deletes it).
type side struct {
	path string
	mode filemode.FileMode
	hash plumbing.Hash
}

// change is one changed path between two trees.
type change struct{ from, to side }

// treeChanges compares two trees, path by path. It is ours rather than
// go-git's DiffTree, which refuses entries it would not check out (a
// ".git" directory, a name with a backslash): an audit must compare
// exactly those. Renames are paired only when the content is identical.
func (a *Audit) treeChanges(ctx context.Context, from, to plumbing.Hash) ([]change, error) {
	var out []change
	if err := a.diffTrees(ctx, from, to, "", &out); err != nil {
		return nil, err
	}
	pairRenames(out)
	kept := out[:0]
	for _, c := range out {
		if c.from.path != "" || c.to.path != "" {
			kept = append(kept, c)
		}
	}
	sort.SliceStable(kept, func(i, j int) bool { return kept[i].name() < kept[j].name() })
	return kept, nil
}

func (c change) name() string {
	if c.to.path != "" {
		return c.to.path
	}
	return c.from.path
}

func (a *Audit) entries(h plumbing.Hash) (map[string]object.TreeEntry, error) {
	m := map[string]object.TreeEntry{}
	if h.IsZero() {
		return m, nil
	}
	t, err := a.repo.TreeObject(h)
	if err != nil {
		return nil, err
	}
	for _, e := range t.Entries {
		m[e.Name] = e
	}
	return m, nil
}

func (a *Audit) diffTrees(ctx context.Context, from, to plumbing.Hash, prefix string, out *[]change) error {
	if from == to {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fe, err := a.entries(from)
	if err != nil {
		return err
	}
	te, err := a.entries(to)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(fe)+len(te))
	for n := range fe {
		names = append(names, n)
	}
	for n := range te {
		if _, ok := fe[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		f, inFrom := fe[n]
		t, inTo := te[n]
		if inFrom && inTo && f.Hash == t.Hash && f.Mode == t.Mode {
			continue
		}
		p := path.Join(prefix, n)
		var fromSide, toSide side
		var fromTree, toTree plumbing.Hash
		if inFrom {
			if f.Mode == filemode.Dir {
				fromTree = f.Hash
			} else {
				fromSide = side{p, f.Mode, f.Hash}
			}
		}
		if inTo {
			if t.Mode == filemode.Dir {
				toTree = t.Hash
			} else {
				toSide = side{p, t.Mode, t.Hash}
			}
		}
		if fromSide.path != "" || toSide.path != "" {
			*out = append(*out, change{fromSide, toSide})
		}
		if !fromTree.IsZero() || !toTree.IsZero() {
			if err := a.diffTrees(ctx, fromTree, toTree, p, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// pairRenames turns a deletion and an addition of the same content into
// one rename (the paired addition is emptied, for the caller to drop).
func pairRenames(cs []change) {
	deleted := map[plumbing.Hash][]int{}
	for i, c := range cs {
		if c.to.path == "" {
			deleted[c.from.hash] = append(deleted[c.from.hash], i)
		}
	}
	for i := range cs {
		c := &cs[i]
		if c.from.path != "" || c.to.path == "" {
			continue
		}
		if ds := deleted[c.to.hash]; len(ds) > 0 {
			d := &cs[ds[0]]
			deleted[c.to.hash] = ds[1:]
			d.to = c.to
			c.to = side{}
		}
	}
}
