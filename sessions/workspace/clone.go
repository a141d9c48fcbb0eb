package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"
)

// listTimeout bounds the first exchange with a source: a port that accepts
// and never answers (git:// to an HTTP server, say) must not hold a
// session_create forever.
const listTimeout = 2 * time.Minute

// origin is a source to clone from, as go-git dials it and as people see it.
type origin struct {
	url     string // what go-git dials
	shown   string // what messages and the session record say
	shallow bool   // branches and tags can be fetched at depth 1
	public  bool   // the caller is not the operator: errors say less
	// proxy holds an ssh dial to the caller's address rule (SSHProxy).
	proxy transport.ProxyOptions
	auth  bool // the clone logs in with the caller's identity
}

// cloneRemote clones a network URL.
func cloneRemote(ctx context.Context, spec Spec, src Source) (Prepared, error) {
	ctx = withNetPolicy(ctx, spec.Policy)
	o := origin{url: src.Raw, shown: displayURL(src), shallow: true, public: !spec.Policy.Trusted}
	if src.URL.Scheme == "ssh" {
		o.proxy = SSHProxy(spec.Policy)
	}
	return clone(ctx, spec, o, src.String())
}

// cloneLocal clones an opened local repository in-process.
func cloneLocal(ctx context.Context, spec Spec, src Source, d *LocalDir) (Prepared, error) {
	u, done, err := serveLocal(d)
	if err != nil {
		return Prepared{}, err
	}
	defer done()
	// go-git's in-process upload-pack has no shallow support; a local
	// clone copies the whole history, as git does for local paths.
	return clone(ctx, spec, origin{url: u, shown: src.String(), shallow: false}, src.String())
}

// clone lists the source's refs, picks what spec.Ref names, and clones it
// into spec.Dir. recorded is the source the session keeps.
func clone(ctx context.Context, spec Spec, o origin, recorded string) (Prepared, error) {
	o.auth = spec.Auth != nil
	if err := makeEmptyDir(spec.Dir); err != nil {
		return Prepared{}, err
	}
	progress := spec.Progress
	if progress == nil {
		progress = io.Discard
	}
	fmt.Fprintf(progress, "cloning %s\n", o.shown)
	repo, err := fetchInto(ctx, spec, o, progress)
	if err != nil {
		os.RemoveAll(spec.Dir)
		return Prepared{}, err
	}
	// The remote is the source people named, not go-git's private endpoint.
	if cfg, err := repo.Config(); err == nil && cfg.Remotes["origin"] != nil {
		cfg.Remotes["origin"].URLs = []string{recorded}
		_ = repo.SetConfig(cfg)
	}
	head, err := repo.Head()
	if err != nil {
		os.RemoveAll(spec.Dir)
		return Prepared{}, fmt.Errorf("clone %s: %w", o.shown, err)
	}
	if err := keepBase(repo, head, spec.KeepBaseIn); err != nil {
		os.RemoveAll(spec.Dir)
		return Prepared{}, err
	}
	fmt.Fprintf(progress, "checked out %s\n", head.Hash())
	return Prepared{Mode: Clone, Dir: spec.Dir, Source: recorded, Commit: head.Hash().String()}, nil
}

// fetchInto decides from the advertised refs whether spec.Ref is a branch,
// a tag or (perhaps) a commit, then clones accordingly.
func fetchInto(ctx context.Context, spec Spec, o origin, progress io.Writer) (*git.Repository, error) {
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	refs, err := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{o.url}}).
		ListContext(lctx, &git.ListOptions{Auth: spec.Auth, ProxyOptions: o.proxy})
	cancel()
	if err != nil {
		return nil, cloneError(ctx, o, err)
	}
	var name plumbing.ReferenceName
	if spec.Ref != "" {
		name = pickRef(refs, spec.Ref)
		if name == "" && !maybeCommit(spec.Ref) {
			return nil, invalid("ref %q is not a branch, tag or commit of %s", spec.Ref, o.shown)
		}
	}
	opts := &git.CloneOptions{URL: o.url, Progress: progress, Auth: spec.Auth, ProxyOptions: o.proxy}
	if name == "" && spec.Ref != "" {
		opts.NoCheckout = true // a commit: the whole history, then check out
	} else {
		opts.ReferenceName, opts.SingleBranch, opts.Tags = name, true, git.NoTags
		if o.shallow {
			opts.Depth = 1
		}
	}
	repo, err := git.PlainCloneContext(ctx, spec.Dir, false, opts)
	if err != nil {
		return nil, cloneError(ctx, o, err)
	}
	if !opts.NoCheckout {
		return repo, nil
	}
	hash, err := repo.ResolveRevision(plumbing.Revision(spec.Ref))
	if err != nil {
		return nil, invalid("ref %q is not a branch, tag or commit of %s", spec.Ref, o.shown)
	}
	wt, err := repo.Worktree()
	if err == nil {
		err = wt.Checkout(&git.CheckoutOptions{Hash: *hash, Force: true})
	}
	if err != nil {
		return nil, fmt.Errorf("clone %s: check out %s: %w", o.shown, spec.Ref, err)
	}
	return repo, nil
}

// pickRef finds ref among the advertised branches, then tags.
func pickRef(refs []*plumbing.Reference, ref string) plumbing.ReferenceName {
	for _, want := range []plumbing.ReferenceName{plumbing.NewBranchReferenceName(ref), plumbing.NewTagReferenceName(ref)} {
		for _, r := range refs {
			if r.Name() == want {
				return want
			}
		}
	}
	return ""
}

// maybeCommit reports whether ref could abbreviate a commit id.
func maybeCommit(ref string) bool {
	if len(ref) < 4 || len(ref) > 40 {
		return false
	}
	for _, c := range ref {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// cloneError says what failed in general terms. To a caller who is not
// the operator, an unreachable host, a closed port, an open port that is
// not git and a missing repository look the same: the clone must not be a
// way to learn what listens where.
func cloneError(ctx context.Context, o origin, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("clone %s: %w", o.shown, ctx.Err())
	}
	switch {
	case errors.Is(err, errNotPublic):
		return invalid("could not clone %s: the host does not resolve to a public internet address, and this "+
			"server clones only from public hosts", o.shown)
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod):
		if o.auth {
			return invalid("could not clone %s: the server refused the identity's key or token (is it allowed to "+
				"read this repository?)", o.shown)
		}
		if o.public {
			return invalid("could not clone %s: the repository asks for authentication (is it private?); "+
				"this server clones public repositories only", o.shown)
		}
		return invalid("could not clone %s: authentication required or refused: %v", o.shown, err)
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return invalid("could not clone %s: the repository is empty", o.shown)
	}
	if o.public {
		return invalid("could not clone %s: the server did not answer as a git repository (check the URL; the "+
			"host may be unreachable, or no repository is there)", o.shown)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return invalid("could not clone %s: no answer within %s", o.shown, listTimeout)
	}
	if errors.Is(err, transport.ErrRepositoryNotFound) {
		return invalid("could not clone %s: no repository there", o.shown)
	}
	if noSpace(err) {
		return FullDisk(err, "could not clone "+o.shown)
	}
	return invalid("could not clone %s: %v", o.shown, err)
}
