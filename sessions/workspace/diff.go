package workspace

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	fdiff "github.com/go-git/go-git/v5/plumbing/format/diff"

	"github.com/warrenhq/warren/sessions/errs"
)

// Diff is a workspace compared with its base.
type Diff struct {
	// Base is the base commit in the audit repository.
	Base string `json:"base"`
	// Patch is a unified diff; binary and large files are named, not shown.
	Patch string `json:"patch"`
	// Truncated is true when Patch was cut at the caller's cap.
	Truncated bool `json:"truncated"`
	// Files summarises each changed path.
	Files []FileChange `json:"files"`
	// Notes says what the diff summarises or leaves out: files recorded by
	// size only, entries the walk skipped, files past the summary's cap.
	Notes []string `json:"notes,omitempty"`
}

// FileChange is one changed path.
type FileChange struct {
	Path      string `json:"path"`
	Status    string `json:"status"` // added, modified, deleted, renamed
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Binary    bool   `json:"binary"`
	// Note says why the patch does not show this file's lines, when it
	// does not: a large file, or a summary of a .git object store.
	Note string `json:"note,omitempty"`
}

// ErrNoBase is returned by Diff before SetBase.
var ErrNoBase = errs.New(errs.Conflict, "the workspace has no base snapshot")

// Diff compares the tree src streams with the base, everything
// included but the operator's exclusions. maxPatch caps the patch text (0:
// no cap); the patch is written file by file and stops at the cap, and no
// file over Limits.DiffFileBytes is compared line by line, so a diff holds
// about maxPatch plus two such files in memory.
func (a *Audit) Diff(ctx context.Context, src TreeSource, maxPatch int) (Diff, error) {
	ctx, span := tracer.Start(ctx, "workspace.diff")
	defer span.End()
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
	curHash, notes, err := a.tw.write(ctx, src)
	if err != nil {
		return Diff{}, fmt.Errorf("diff: %w", err)
	}
	changes, err := a.treeChanges(ctx, baseTree.Hash, curHash)
	if err != nil {
		return Diff{}, fmt.Errorf("diff: %w", err)
	}
	d := Diff{Base: ref.Hash().String(), Files: []FileChange{}, Notes: notes}
	out := &capWriter{max: maxPatch}
	objects := map[string]*[2]int{} // .git/objects/ dir → added, removed
	var order []string
	unlisted := 0
	for _, ch := range changes {
		if err := ctx.Err(); err != nil {
			return Diff{}, err
		}
		fc := summary(ch)
		if dir, ok := gitObjectsDir(fc.Path); ok {
			if objects[dir] == nil {
				objects[dir] = &[2]int{}
				order = append(order, dir)
			}
			if fc.Status != "deleted" {
				objects[dir][0]++
			}
			if fc.Status != "added" {
				objects[dir][1]++
			}
			continue
		}
		if len(d.Files) >= a.tw.limits.MaxFiles {
			unlisted++
			continue
		}
		if err := a.patchFile(ctx, ch, &fc, out); err != nil {
			return Diff{}, fmt.Errorf("diff %s: %w", fc.Path, err)
		}
		d.Files = append(d.Files, fc)
	}
	for _, dir := range order {
		n := objects[dir]
		d.Files = append(d.Files, FileChange{Path: dir, Status: "modified",
			Note: fmt.Sprintf("git object store: %d objects written, %d removed (not listed one by one)", n[0], n[1])})
	}
	if unlisted > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("%d more changed files not listed (the summary stops at %d)", unlisted, a.tw.limits.MaxFiles))
	}
	d.Patch, d.Truncated = out.b.String(), out.cut
	if out.cut {
		d.Patch += fmt.Sprintf("\n[... diff cut at %d bytes; files lists the changed files ...]\n", maxPatch)
	}
	return d, nil
}

// summary is the path and status of a change.
func summary(ch change) FileChange {
	fc := FileChange{Path: ch.to.path, Status: "modified"}
	switch {
	case ch.from.path == "":
		fc.Status = "added"
	case ch.to.path == "":
		fc.Status, fc.Path = "deleted", ch.from.path
	case ch.from.path != ch.to.path:
		fc.Status = "renamed"
	}
	return fc
}

// gitObjectsDir returns the object store a path is in (".git/objects/",
// "sub/.git/objects/"): its churn is summarised, not listed.
func gitObjectsDir(p string) (string, bool) {
	parts := strings.Split(p, "/")
	for i := 0; i+2 < len(parts); i++ {
		if parts[i] == ".git" && parts[i+1] == "objects" {
			return strings.Join(parts[:i+2], "/") + "/", true
		}
	}
	return "", false
}

// patchFile counts a change's lines into fc and writes its patch to out,
// unless out is full. Large files are named with their sizes instead.
func (a *Audit) patchFile(ctx context.Context, ch change, fc *FileChange, out *capWriter) error {
	from, fromWhy, err := a.sideSize(ch.from)
	if err != nil {
		return err
	}
	to, toWhy, err := a.sideSize(ch.to)
	if err != nil {
		return err
	}
	if fromWhy != "" || toWhy != "" {
		sizes := fmt.Sprintf("%d → %d bytes", from, to)
		switch fc.Status {
		case "added":
			sizes = fmt.Sprintf("%d bytes", to)
		case "deleted":
			sizes = fmt.Sprintf("%d bytes", from)
		}
		why := toWhy
		if why == "" || fc.Status == "deleted" {
			why = fromWhy
		}
		fc.Note = fmt.Sprintf("large file, %s, not compared line by line: %s", sizes, why)
		fromName, toName := "a/"+fc.Path, "b/"+fc.Path
		if ch.from.path != "" {
			fromName = "a/" + ch.from.path
		}
		fmt.Fprintf(out, "diff --git %s %s\nLarge file %s, %s, not shown: %s\n", fromName, toName, fc.Status, sizes, why)
		return nil
	}
	fp, err := a.linePatch(ctx, ch)
	if err != nil {
		return err
	}
	fc.Additions, fc.Deletions = lineCounts(fp)
	fc.Binary = fp.binary
	if !out.cut {
		// Encode stops at the first write the cap refuses.
		_ = fdiff.NewUnifiedEncoder(out, fdiff.DefaultContextLines).Encode(onePatch{fp})
	}
	return nil
}

// sideSize is the size of one side of a change (0 when absent) and, when
// it is too large to compare, why: over Limits.DiffFileBytes, or recorded
// by size only (a marker blob, whose reason it returns).
func (a *Audit) sideSize(e side) (int64, string, error) {
	if e.path == "" {
		return 0, "", nil
	}
	size, err := a.blobSize(e.hash)
	if err != nil {
		return 0, "", err
	}
	if size > a.tw.limits.DiffFileBytes {
		return size, fmt.Sprintf("over the %d bytes compared per file", a.tw.limits.DiffFileBytes), nil
	}
	if size > 512 || size < int64(len(markerPrefix)) {
		return size, "", nil
	}
	head, err := a.readBlob(e.hash)
	if err != nil {
		return 0, "", err
	}
	if real, why, ok := parseMarker(string(head)); ok {
		return real, why, nil
	}
	return size, "", nil
}

// blobSize reads an object's size without its content.
func (a *Audit) blobSize(h plumbing.Hash) (int64, error) {
	if s, ok := a.repo.Storer.(interface {
		EncodedObjectSize(plumbing.Hash) (int64, error)
	}); ok {
		return s.EncodedObjectSize(h)
	}
	obj, err := a.repo.Storer.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return 0, err
	}
	return obj.Size(), nil
}

// capWriter keeps what is written up to max bytes (0: no cap) and refuses
// the rest.
type capWriter struct {
	b   strings.Builder
	max int
	cut bool
}

var errCapped = errors.New("the patch reached its cap")

func (c *capWriter) Write(p []byte) (int, error) {
	if c.cut {
		return 0, errCapped
	}
	if c.max > 0 && c.b.Len()+len(p) > c.max {
		c.b.Write(p[:c.max-c.b.Len()])
		c.cut = true
		return 0, errCapped
	}
	return c.b.Write(p)
}
