package workspace

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Refs in an audit repository.
const (
	BaseRef      = plumbing.ReferenceName("refs/warren/base")
	SnapshotsRef = plumbing.ReferenceName("refs/warren/snapshots")
)

// Audit is a bare git repository, outside every jail, that records a
// workspace: its base and its snapshots. The jail cannot rewrite it.
type Audit struct {
	dir  string
	repo *git.Repository
	tw   *treeWriter
	// Now is the clock for commit times.
	Now func() time.Time
}

// OpenAudit opens the audit repository at path, creating it if needed.
func OpenAudit(path string) (*Audit, error) {
	repo, err := git.PlainOpen(path)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		repo, err = git.PlainInit(path, true)
	}
	if err != nil {
		return nil, fmt.Errorf("open audit repository: %w", err)
	}
	return &Audit{dir: path, repo: repo, tw: &treeWriter{store: repo.Storer}, Now: time.Now}, nil
}

func (a *Audit) path() string { return a.dir }

var signature = object.Signature{Name: "warren", Email: "warren@localhost"}

// SetBase records dir as the base every diff compares against. origin says
// where the base came from (e.g. the cloned commit) and goes in the commit
// message.
func (a *Audit) SetBase(ctx context.Context, dir, origin string) (string, error) {
	h, err := a.commit(ctx, dir, "base: "+origin, nil)
	if err != nil {
		return "", err
	}
	if err := a.repo.Storer.SetReference(plumbing.NewHashReference(BaseRef, h)); err != nil {
		return "", fmt.Errorf("set base: %w", err)
	}
	if err := a.repo.Storer.SetReference(plumbing.NewHashReference(SnapshotsRef, h)); err != nil {
		return "", fmt.Errorf("set base: %w", err)
	}
	return h.String(), nil
}

// Snapshot commits the current content of dir on the snapshots ref, with
// the previous snapshot as parent, and returns the commit id.
func (a *Audit) Snapshot(ctx context.Context, dir, reason string) (string, error) {
	var parents []plumbing.Hash
	if ref, err := a.repo.Reference(SnapshotsRef, true); err == nil {
		parents = append(parents, ref.Hash())
	}
	h, err := a.commit(ctx, dir, reason, parents)
	if err != nil {
		return "", err
	}
	if err := a.repo.Storer.SetReference(plumbing.NewHashReference(SnapshotsRef, h)); err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	return h.String(), nil
}

// Snapshots lists the snapshot commits, newest first.
func (a *Audit) Snapshots() ([]SnapshotInfo, error) {
	ref, err := a.repo.Reference(SnapshotsRef, true)
	if err != nil {
		return nil, nil
	}
	iter, err := a.repo.Log(&git.LogOptions{From: ref.Hash()})
	if err != nil {
		return nil, err
	}
	var out []SnapshotInfo
	err = iter.ForEach(func(c *object.Commit) error {
		out = append(out, SnapshotInfo{ID: c.Hash.String(), Reason: strings.TrimSpace(c.Message), Time: c.Author.When})
		return nil
	})
	return out, err
}

// SnapshotInfo describes one snapshot.
type SnapshotInfo struct {
	ID     string    `json:"id"`
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
}

func (a *Audit) commit(ctx context.Context, dir, message string, parents []plumbing.Hash) (plumbing.Hash, error) {
	tree, err := a.tw.write(ctx, dir)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("snapshot %s: %w", dir, err)
	}
	sig := signature
	sig.When = a.Now()
	c := &object.Commit{Author: sig, Committer: sig, Message: message + "\n", TreeHash: tree, ParentHashes: parents}
	obj := a.repo.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return a.repo.Storer.SetEncodedObject(obj)
}
