package workspace

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/utils/merkletrie"
)

// Diff is a workspace compared with its base.
type Diff struct {
	// Base is the base commit in the audit repository.
	Base string `json:"base"`
	// Patch is a unified diff; binary files are named, not shown.
	Patch string `json:"patch"`
	// Truncated is true when Patch was cut at the caller's cap.
	Truncated bool `json:"truncated"`
	// Files summarises each changed path.
	Files []FileChange `json:"files"`
}

// FileChange is one changed path.
type FileChange struct {
	Path      string `json:"path"`
	Status    string `json:"status"` // added, modified, deleted
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Binary    bool   `json:"binary"`
}

// isNilFile reports whether an interface holds a typed nil pointer: go-git
// returns (*file)(nil) for the missing side of an added or deleted file.
func isNilFile(f interface{ Path() string }) bool {
	v := reflect.ValueOf(f)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// ErrNoBase is returned by Diff before SetBase.
var ErrNoBase = errors.New("the workspace has no base snapshot")

// Diff compares the current content of dir with the base, untracked files
// included and ignored files left out. maxPatch caps the patch text (0:
// no cap).
func (a *Audit) Diff(ctx context.Context, dir string, maxPatch int) (Diff, error) {
	ref, err := a.repo.Reference(BaseRef, true)
	if err != nil {
		return Diff{}, ErrNoBase
	}
	base, err := a.repo.CommitObject(ref.Hash())
	if err != nil {
		return Diff{}, fmt.Errorf("diff: base: %w", err)
	}
	baseTree, err := base.Tree()
	if err != nil {
		return Diff{}, fmt.Errorf("diff: base tree: %w", err)
	}
	curHash, err := a.tw.write(ctx, dir)
	if err != nil {
		return Diff{}, fmt.Errorf("diff: %w", err)
	}
	cur, err := a.repo.TreeObject(curHash)
	if err != nil {
		return Diff{}, fmt.Errorf("diff: %w", err)
	}
	changes, err := object.DiffTreeWithOptions(ctx, baseTree, cur, object.DefaultDiffTreeOptions)
	if err != nil {
		return Diff{}, fmt.Errorf("diff: %w", err)
	}
	patch, err := changes.PatchContext(ctx)
	if err != nil {
		return Diff{}, fmt.Errorf("diff: %w", err)
	}
	d := Diff{Base: ref.Hash().String(), Patch: patch.String(), Files: []FileChange{}}
	if maxPatch > 0 && len(d.Patch) > maxPatch {
		d.Patch = d.Patch[:maxPatch] + fmt.Sprintf("\n[... diff cut at %d of %d bytes ...]\n", maxPatch, len(patch.String()))
		d.Truncated = true
	}
	// Stats and file patches come in their own order: match them by path.
	stats := map[string]object.FileStat{}
	for _, st := range patch.Stats() {
		stats[st.Name] = st
	}
	binary := map[string]bool{}
	for _, fp := range patch.FilePatches() {
		from, to := fp.Files()
		for _, f := range []interface{ Path() string }{from, to} {
			if f != nil && !isNilFile(f) {
				binary[f.Path()] = fp.IsBinary()
			}
		}
	}
	for _, ch := range changes {
		action, err := ch.Action()
		if err != nil {
			return Diff{}, fmt.Errorf("diff: %w", err)
		}
		fc := FileChange{Path: ch.To.Name, Status: "modified"}
		switch action {
		case merkletrie.Insert:
			fc.Status = "added"
		case merkletrie.Delete:
			fc.Status, fc.Path = "deleted", ch.From.Name
		default:
			if ch.From.Name != ch.To.Name {
				fc.Status = "renamed"
			}
		}
		st := stats[fc.Path]
		fc.Additions, fc.Deletions, fc.Binary = st.Addition, st.Deletion, binary[fc.Path]
		d.Files = append(d.Files, fc)
	}
	return d, nil
}
