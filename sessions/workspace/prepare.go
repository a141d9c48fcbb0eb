// Package workspace prepares the directory a session's jail works in and
// keeps an audit trail of it.
//
// A workspace is cloned from a git URL or a local repository (the source is
// never modified), bound to an existing directory (edits land in place), or
// empty. Independently of how it was made, every workspace has an audit
// repository outside the jail's reach: a base snapshot taken at creation,
// snapshots at pause and archive, and diffs of the live directory against
// the base, untracked files included.
package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// Mode says how a workspace is made.
type Mode string

// The workspace modes.
const (
	// Clone copies a git URL or local repository into a directory of its own.
	Clone Mode = "clone"
	// Bind works in an existing directory in place.
	Bind Mode = "bind"
	// Empty starts from an empty directory.
	Empty Mode = "empty"
)

// Spec describes a workspace to prepare.
type Spec struct {
	// Source is a git URL (https, http, ssh, file://), a local path, or "".
	Source string
	// Mode is clone, bind or empty; "" infers it from Source.
	Mode Mode
	// Ref selects a branch, tag or commit to check out (clone only).
	Ref string
	// Dir is where a clone or an empty workspace is made; it must not exist
	// or be empty. Bind mode ignores it and uses Source.
	Dir string
	// Progress receives human-readable progress lines; may be nil.
	Progress io.Writer
}

// Prepared is the outcome of Prepare.
type Prepared struct {
	Mode Mode
	// Dir is the absolute host path of the workspace.
	Dir string
	// Source is the normalised source (absolute path or URL).
	Source string
	// Commit is the checked-out commit of a clone ("" otherwise).
	Commit string
}

// ErrInvalid marks a bad Spec; the message says what is wrong.
var ErrInvalid = errors.New("invalid workspace")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// Infer fills in Mode from Source: URLs and local repositories are cloned,
// other directories are bound, no source is empty.
func (s Spec) Infer() (Spec, error) {
	if s.Mode != "" {
		switch s.Mode {
		case Clone, Bind, Empty:
		default:
			return s, invalid("mode %q: use clone, bind or empty", s.Mode)
		}
		if s.Mode != Empty && s.Source == "" {
			return s, invalid("mode %s needs a source", s.Mode)
		}
		if s.Mode == Empty && s.Source != "" {
			return s, invalid("mode empty takes no source (got %q)", s.Source)
		}
		return s, nil
	}
	switch {
	case s.Source == "":
		s.Mode = Empty
	case isURL(s.Source):
		s.Mode = Clone
	default:
		fi, err := os.Stat(s.Source)
		if err != nil {
			return s, invalid("source %s: no such directory, and not a git URL", s.Source)
		}
		if !fi.IsDir() {
			return s, invalid("source %s is a file, not a directory or repository", s.Source)
		}
		if _, err := os.Stat(filepath.Join(s.Source, ".git")); err == nil {
			s.Mode = Clone
		} else {
			s.Mode = Bind
		}
	}
	return s, nil
}

func isURL(s string) bool {
	for _, p := range []string{"https://", "http://", "ssh://", "file://", "git://"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return strings.HasPrefix(s, "git@") && strings.Contains(s, ":")
}

// validRef refuses refs git itself would refuse, and any that could be
// read as an option.
func validRef(ref string) error {
	if ref == "" {
		return nil
	}
	if strings.HasPrefix(ref, "-") || strings.Contains(ref, "..") || strings.ContainsAny(ref, " ~^:?*[\\\x00\x7f") ||
		strings.HasSuffix(ref, ".lock") || strings.HasSuffix(ref, "/") || strings.HasPrefix(ref, "/") {
		return invalid("ref %q is not a valid branch, tag or commit name", ref)
	}
	for _, c := range ref {
		if c < 0x20 {
			return invalid("ref %q contains a control character", ref)
		}
	}
	return nil
}

// Prepare makes the workspace described by spec.
func Prepare(ctx context.Context, spec Spec) (Prepared, error) {
	ctx, span := tracer.Start(ctx, "workspace.prepare")
	defer span.End()
	spec, err := spec.Infer()
	if err != nil {
		return Prepared{}, err
	}
	if err := validRef(spec.Ref); err != nil {
		return Prepared{}, err
	}
	if spec.Ref != "" && spec.Mode != Clone {
		return Prepared{}, invalid("ref %q needs a git source (mode clone)", spec.Ref)
	}
	switch spec.Mode {
	case Bind:
		dir, err := filepath.Abs(spec.Source)
		if err != nil {
			return Prepared{}, err
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return Prepared{}, invalid("bind source %s is not a directory", spec.Source)
		}
		return Prepared{Mode: Bind, Dir: dir, Source: dir}, nil
	case Empty:
		if err := makeEmptyDir(spec.Dir); err != nil {
			return Prepared{}, err
		}
		return Prepared{Mode: Empty, Dir: spec.Dir}, nil
	}
	return clone(ctx, spec)
}

func makeEmptyDir(dir string) error {
	if dir == "" {
		return invalid("no directory for the workspace")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create workspace: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("create workspace: %w", err)
	}
	if len(entries) > 0 {
		return invalid("workspace directory %s is not empty", dir)
	}
	return nil
}

// clone copies the source into spec.Dir and checks out spec.Ref. Branches
// and tags are fetched shallow (depth 1); a commit needs the history.
func clone(ctx context.Context, spec Spec) (Prepared, error) {
	source := spec.Source
	if !isURL(source) {
		abs, err := filepath.Abs(source)
		if err != nil {
			return Prepared{}, err
		}
		if _, err := git.PlainOpen(abs); err != nil {
			return Prepared{}, invalid("source %s is not a git repository: %v", source, err)
		}
		source = abs
	} else if u, err := url.Parse(source); err == nil && u.User != nil {
		if _, hasPw := u.User.Password(); hasPw {
			return Prepared{}, invalid("source URL carries a password; use a credential helper instead of putting secrets in the URL")
		}
	}
	if err := makeEmptyDir(spec.Dir); err != nil {
		return Prepared{}, err
	}
	progress := spec.Progress
	if progress == nil {
		progress = io.Discard
	}
	fmt.Fprintf(progress, "cloning %s\n", source)

	var repo *git.Repository
	var err error
	tryShallow := func(name plumbing.ReferenceName) error {
		repo, err = git.PlainCloneContext(ctx, spec.Dir, false, &git.CloneOptions{
			URL: source, ReferenceName: name, SingleBranch: true, Depth: 1,
			Progress: progress, Tags: git.NoTags,
		})
		if err != nil {
			os.RemoveAll(spec.Dir)
			_ = os.MkdirAll(spec.Dir, 0o755)
		}
		return err
	}
	switch {
	case spec.Ref == "":
		err = tryShallow("")
	default:
		err = tryShallow(plumbing.NewBranchReferenceName(spec.Ref))
		if err != nil && ctx.Err() == nil {
			err = tryShallow(plumbing.NewTagReferenceName(spec.Ref))
		}
		if err != nil && ctx.Err() == nil {
			repo, err = cloneAtCommit(ctx, spec, source, progress)
		}
	}
	if err != nil {
		os.RemoveAll(spec.Dir)
		if ctx.Err() != nil {
			return Prepared{}, fmt.Errorf("clone %s: %w", source, ctx.Err())
		}
		if spec.Ref != "" {
			return Prepared{}, invalid("ref %q is not a branch, tag or commit of %s", spec.Ref, source)
		}
		return Prepared{}, fmt.Errorf("clone %s: %w", source, err)
	}
	head, err := repo.Head()
	if err != nil {
		return Prepared{}, fmt.Errorf("clone %s: %w", source, err)
	}
	fmt.Fprintf(progress, "checked out %s\n", head.Hash())
	return Prepared{Mode: Clone, Dir: spec.Dir, Source: source, Commit: head.Hash().String()}, nil
}

// cloneAtCommit fetches the whole history and checks out a commit.
func cloneAtCommit(ctx context.Context, spec Spec, source string, progress io.Writer) (*git.Repository, error) {
	repo, err := git.PlainCloneContext(ctx, spec.Dir, false, &git.CloneOptions{
		URL: source, NoCheckout: true, Progress: progress,
	})
	if err != nil {
		return nil, err
	}
	hash, err := repo.ResolveRevision(plumbing.Revision(spec.Ref))
	if err != nil {
		return nil, err
	}
	wt, err := repo.Worktree()
	if err != nil {
		return nil, err
	}
	if err := wt.Checkout(&git.CheckoutOptions{Hash: *hash, Force: true}); err != nil {
		return nil, err
	}
	return repo, nil
}
