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
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/warrenhq/warren/sessions/errs"
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
	// Source is a git URL (https, http, ssh, git, file://), an scp-like
	// address (git@host:path), a local path, or "".
	Source string
	// Mode is clone, bind or empty; "" infers it from Source.
	Mode Mode
	// Ref selects a branch, tag or commit to check out (clone only).
	Ref string
	// Dir is where a clone or an empty workspace is made; it must not exist
	// or be empty. Bind mode ignores it and uses Source.
	Dir string
	// Policy says which sources the caller may use; the zero Policy allows
	// https URLs of public hosts only.
	Policy Policy
	// Progress receives human-readable progress lines; may be nil.
	Progress io.Writer
	// Auth logs a clone in (an identity's key or token); nil: anonymous,
	// or for a trusted caller the server's own ssh agent (see upstream.go).
	Auth transport.AuthMethod
	// KeepBaseIn, when set, is an audit repository that receives the
	// cloned commit and its tree as UpstreamRef, so that a push can build
	// on them without reading the workspace's .git again.
	KeepBaseIn string
}

// Prepared is the outcome of Prepare.
type Prepared struct {
	Mode Mode
	// Dir is the absolute host path of the workspace; for a bind, the
	// source resolved (no links).
	Dir string
	// Source is the normalised source: the resolved path, file:// and the
	// resolved path, or the URL.
	Source string
	// Commit is the checked-out commit of a clone ("" otherwise).
	Commit string
}

// ErrInvalid marks a bad Spec; the message says what is wrong.
var ErrInvalid = errs.New(errs.Invalid, "invalid workspace")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// checkMode refuses a mode that does not go with the source.
func (s Spec) checkMode() error {
	switch s.Mode {
	case "", Clone, Bind, Empty:
	default:
		return invalid("mode %q: use clone, bind or empty", s.Mode)
	}
	if s.Mode != "" && s.Mode != Empty && s.Source == "" {
		return invalid("mode %s needs a source", s.Mode)
	}
	if s.Mode == Empty && s.Source != "" {
		return invalid("mode empty takes no source (got %q)", s.Source)
	}
	return nil
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

// Prepare makes the workspace described by spec. The source is parsed,
// checked against spec.Policy and, when local, opened and resolved before
// anything is bound or copied.
func Prepare(ctx context.Context, spec Spec) (Prepared, error) {
	ctx, span := tracer.Start(ctx, "workspace.prepare")
	defer span.End()
	if err := spec.checkMode(); err != nil {
		return Prepared{}, err
	}
	if err := validRef(spec.Ref); err != nil {
		return Prepared{}, err
	}
	if spec.Source == "" {
		if spec.Ref != "" {
			return Prepared{}, invalid("ref %q needs a git source (mode clone)", spec.Ref)
		}
		if err := makeEmptyDir(spec.Dir); err != nil {
			return Prepared{}, err
		}
		return Prepared{Mode: Empty, Dir: spec.Dir}, nil
	}
	src, err := ParseSource(spec.Source)
	if err != nil {
		return Prepared{}, err
	}
	pol := spec.Policy
	pol.identity = spec.Auth != nil
	if err := pol.check(src, spec.Mode); err != nil {
		return Prepared{}, err
	}
	if !src.Local() {
		return cloneRemote(ctx, spec, src)
	}
	d, err := OpenLocal(src.Path, spec.Policy)
	if err != nil {
		return Prepared{}, err
	}
	defer d.Close()
	src.Path = d.Real
	mode := spec.Mode
	if mode == "" {
		mode = Bind
		if isRepo(d) {
			mode = Clone
		}
	}
	if spec.Ref != "" && mode != Clone {
		return Prepared{}, invalid("ref %q needs a git source (mode clone)", spec.Ref)
	}
	if mode == Bind && spec.Policy.NoBind {
		return Prepared{}, errNoBind
	}
	if mode == Bind {
		return Prepared{Mode: Bind, Dir: d.Real, Source: d.Real}, nil
	}
	return cloneLocal(ctx, spec, src, d)
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
