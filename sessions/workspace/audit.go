package workspace

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/warrenhq/warren/sandbox/runner/proto"
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

// OpenAudit opens the audit repository at path, creating it if needed,
// with DefaultLimits and no exclusions.
func OpenAudit(path string) (*Audit, error) {
	if _, err := git.PlainOpen(path); errors.Is(err, git.ErrRepositoryNotExists) {
		if _, err := git.PlainInit(path, true); err != nil {
			return nil, fmt.Errorf("open audit repository: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("open audit repository: %w", err)
	}
	// A small object cache, and objects above the threshold read lazily
	// from disk: go-git's defaults keep up to 96 MiB of blobs in memory.
	st := filesystem.NewStorageWithOptions(osfs.New(path), cache.NewObjectLRU(4*cache.MiByte),
		filesystem.Options{LargeObjectThreshold: 256 << 10})
	repo, err := git.Open(st, nil)
	if err != nil {
		return nil, fmt.Errorf("open audit repository: %w", err)
	}
	tw := &treeWriter{store: repo.Storer, cacheFile: filepath.Join(path, statCacheFile), limits: DefaultLimits}
	return &Audit{dir: path, repo: repo, tw: tw, Now: time.Now}, nil
}

// SetLimits replaces DefaultLimits for this Audit; zero fields keep their
// default.
func (a *Audit) SetLimits(l Limits) {
	d := DefaultLimits
	if l.MaxFileBytes > 0 {
		d.MaxFileBytes = l.MaxFileBytes
	}
	if l.MaxReadBytes > 0 {
		d.MaxReadBytes = l.MaxReadBytes
	}
	if l.MaxEntries > 0 {
		d.MaxEntries = l.MaxEntries
	}
	if l.MaxDepth > 0 {
		d.MaxDepth = l.MaxDepth
	}
	if l.DiffFileBytes > 0 {
		d.DiffFileBytes = l.DiffFileBytes
	}
	if l.MaxFiles > 0 {
		d.MaxFiles = l.MaxFiles
	}
	a.tw.limits = d
}

// Exclude leaves paths matching the operator's patterns (gitignore syntax,
// relative to the workspace, e.g. "node_modules/" or "*.o") out of
// snapshots and diffs. Nothing in the workspace itself can exclude a path.
func (a *Audit) Exclude(patterns []string) {
	var ps []gitignore.Pattern
	for _, p := range patterns {
		if p = strings.TrimSpace(p); p != "" && !strings.HasPrefix(p, "#") {
			ps = append(ps, gitignore.ParsePattern(p, nil))
		}
	}
	a.tw.exclude = nil
	if len(ps) > 0 {
		a.tw.exclude = gitignore.NewMatcher(ps)
	}
	a.tw.prune = prunable(patterns)
}

// prunable returns the patterns that a name alone decides (no "/" but a
// trailing one), for the runner to leave out without walking into them;
// none when any pattern re-includes ("!"), since a name could then not
// decide. The audit filters what the runner sends with every pattern
// anyway: pruning only saves the walk.
func prunable(patterns []string) []proto.Prune {
	var out []proto.Prune
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		if strings.HasPrefix(p, "!") {
			return nil
		}
		glob, dirOnly := strings.CutSuffix(p, "/")
		if glob == "" || strings.ContainsAny(glob, "/\\") || len(out) >= proto.MaxPrune {
			continue
		}
		if _, err := path.Match(glob, ""); err != nil {
			continue
		}
		out = append(out, proto.Prune{Glob: glob, DirOnly: dirOnly})
	}
	return out
}

var signature = object.Signature{Name: "warren", Email: "warren@localhost"}

// SetBase records the tree src streams as the base every diff compares
// against. origin says where the base came from (e.g. the cloned commit)
// and goes in the commit message.
func (a *Audit) SetBase(ctx context.Context, src TreeSource, origin string) (string, error) {
	ctx, span := tracer.Start(ctx, "workspace.set_base")
	defer span.End()
	h, err := a.commit(ctx, src, "base: "+origin, nil)
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

// Snapshot commits the tree src streams on the snapshots ref, with the
// previous snapshot as parent, and returns the commit id.
func (a *Audit) Snapshot(ctx context.Context, src TreeSource, reason string) (string, error) {
	ctx, span := tracer.Start(ctx, "workspace.snapshot")
	defer span.End()
	var parents []plumbing.Hash
	if ref, err := a.repo.Reference(SnapshotsRef, true); err == nil {
		parents = append(parents, ref.Hash())
	}
	h, err := a.commit(ctx, src, reason, parents)
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

func (a *Audit) commit(ctx context.Context, src TreeSource, message string, parents []plumbing.Hash) (plumbing.Hash, error) {
	tree, _, err := a.tw.write(ctx, src)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("snapshot: %w", err)
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
