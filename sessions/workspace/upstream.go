package workspace

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// UpstreamRef names, in an audit repository, the commit a clone checked
// out, as the remote has it: a push builds its commit on this one.
const UpstreamRef = plumbing.ReferenceName("refs/warren/upstream")

// UpstreamBranchRef, when the clone checked out a branch, points at that
// branch's name (a symbolic ref): what a pull request merges into.
const UpstreamBranchRef = plumbing.ReferenceName("refs/warren/upstream-branch")

// keepBase copies the commit a clone just checked out, and its whole
// tree, into the audit repository at dir (created if needed). It runs
// right after the clone, before any jail has seen the workspace, so what
// it copies is what the remote sent; later, nothing reads the workspace's
// .git again to learn it.
func keepBase(repo *git.Repository, head *plumbing.Reference, dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("keep the cloned commit: %w", err)
	}
	a, err := OpenAudit(dir)
	if err != nil {
		return err
	}
	commit := head.Hash()
	c, err := object.GetCommit(repo.Storer, commit)
	if err != nil {
		return fmt.Errorf("keep the cloned commit: %w", err)
	}
	dst := a.repo.Storer
	if err := copyObject(repo.Storer, dst, commit); err != nil {
		return err
	}
	if err := copyTree(repo.Storer, dst, c.TreeHash, map[plumbing.Hash]bool{}); err != nil {
		return err
	}
	if head.Name().IsBranch() {
		if err := dst.SetReference(plumbing.NewSymbolicReference(UpstreamBranchRef, head.Name())); err != nil {
			return fmt.Errorf("keep the cloned commit: %w", err)
		}
	}
	return dst.SetReference(plumbing.NewHashReference(UpstreamRef, commit))
}

func copyObject(src storer.EncodedObjectStorer, dst storer.EncodedObjectStorer, h plumbing.Hash) error {
	if dst.HasEncodedObject(h) == nil {
		return nil
	}
	o, err := src.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return fmt.Errorf("keep the cloned commit: object %s: %w", h, err)
	}
	if _, err := dst.SetEncodedObject(o); err != nil {
		return fmt.Errorf("keep the cloned commit: %w", err)
	}
	return nil
}

func copyTree(src, dst storer.EncodedObjectStorer, h plumbing.Hash, seen map[plumbing.Hash]bool) error {
	if seen[h] {
		return nil
	}
	seen[h] = true
	t, err := object.GetTree(src, h)
	if err != nil {
		return fmt.Errorf("keep the cloned commit: tree %s: %w", h, err)
	}
	for _, e := range t.Entries {
		switch e.Mode {
		case filemode.Submodule: // another repository's commit: not here
		case filemode.Dir:
			if err := copyTree(src, dst, e.Hash, seen); err != nil {
				return err
			}
		default:
			if err := copyObject(src, dst, e.Hash); err != nil {
				return err
			}
		}
	}
	return copyObject(src, dst, h)
}

// WithNetPolicy returns ctx carrying the address rule of p for go-git's
// HTTP transport, as a clone under p gets: a push over https from a
// caller who is not the operator reaches public addresses only too.
func WithNetPolicy(ctx context.Context, p Policy) context.Context { return withNetPolicy(ctx, p) }

// Repo returns the audit repository, for building a push on its objects.
func (a *Audit) Repo() *git.Repository { return a.repo }

// SnapshotForPush is Snapshot that also says what the walk could not
// record faithfully: entries it left out for a reason other than being a
// socket, FIFO or device (which git cannot hold either). A push must not
// publish a tree in which such a file looks deleted.
func (a *Audit) SnapshotForPush(ctx context.Context, src TreeSource) (id string, incomplete []string, err error) {
	var parents []plumbing.Hash
	if ref, err := a.repo.Reference(SnapshotsRef, true); err == nil {
		parents = append(parents, ref.Hash())
	}
	tree, notes, err := a.tw.write(ctx, src)
	if err != nil {
		return "", nil, fmt.Errorf("snapshot: %w", err)
	}
	for _, n := range notes {
		if strings.Contains(n, "entries left out") && !strings.Contains(n, "socket, FIFO or device") {
			incomplete = append(incomplete, n)
		}
	}
	sig := signature
	sig.When = a.Now()
	c := &object.Commit{Author: sig, Committer: sig, Message: "push\n", TreeHash: tree, ParentHashes: parents}
	obj := a.repo.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return "", nil, err
	}
	h, err := a.repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return "", nil, err
	}
	if err := a.repo.Storer.SetReference(plumbing.NewHashReference(SnapshotsRef, h)); err != nil {
		return "", nil, fmt.Errorf("snapshot: %w", err)
	}
	return h.String(), incomplete, nil
}

// IsMarker reports whether a blob is the marker a snapshot records for a
// file whose content it did not keep (too large): such a blob must never
// be published as the file.
func IsMarker(b []byte) bool {
	_, _, ok := parseMarker(string(b))
	return ok
}
