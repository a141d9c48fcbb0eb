package gitpush

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/bound"
	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/sessions/identity"
	"github.com/warrenhq/warren/sessions/workspace"
)

// Service clones with identities and pushes sessions.
type Service struct {
	Sessions   *sessions.Manager
	Identities *identity.Store
	Store      *Store
	// Pinned is the operator's known_hosts (config git.known_hosts_file); nil: none.
	Pinned ssh.HostKeyCallback
	// HTTP calls forges' APIs (pull requests); nil: a client with a timeout.
	HTTP *http.Client
	Log  zerolog.Logger
}

// Limits on what a caller sends.
const (
	maxBranch   = 200
	maxMessage  = 64 << 10
	maxTitle    = 256
	maxBody     = 64 << 10
	pushTimeout = 10 * time.Minute
)

func invalidf(format string, a ...any) error {
	return errs.New(errs.Invalid, fmt.Sprintf(format, a...))
}

// CloneAuth opens owner's identity name for a clone of source: the
// returned auth holds the key or token in memory. notice is told of a
// host key pinned on first use.
func (s *Service) CloneAuth(ctx context.Context, owner, name, source string, notice func(string)) (transport.AuthMethod, identity.Identity, error) {
	id, err := s.Identities.Get(ctx, owner, name)
	if err != nil {
		return nil, identity.Identity{}, err
	}
	auth, err := s.auth(ctx, id, source, notice)
	return auth, id, err
}

func (s *Service) auth(ctx context.Context, id identity.Identity, source string, notice func(string)) (transport.AuthMethod, error) {
	r, err := identity.ParseRemote(source)
	if err != nil {
		return nil, err
	}
	sec, err := s.Identities.Open(ctx, id)
	if err != nil {
		return nil, err
	}
	if notice == nil {
		notice = func(string) {}
	}
	logged := func(m string) {
		s.Log.Info().Str("identity", id.Name).Str("user", id.Owner).Msg(m)
		notice(m)
	}
	return identity.AuthFor(ctx, r, id, sec, s.Identities.HostKeys(id, s.Pinned, logged))
}

// PullRequest asks for a pull request from the pushed branch.
type PullRequest struct {
	Title string `json:"title" jsonschema:"the pull request's title"`
	Body  string `json:"body,omitempty" jsonschema:"its description (Markdown)"`
	Base  string `json:"base,omitempty" jsonschema:"the branch to merge into; omitted: the session's ref, else the repository's default branch"`
}

// Options describe one push.
type Options struct {
	SessionID string
	// Branch is pushed to; "" is warren/<session id>.
	Branch string
	// Message is the commit message; "" says which session it is.
	Message string
	// Identity overrides the identity the session was cloned with.
	Identity    string
	PullRequest *PullRequest
	// Notice is told of a host key pinned on first use; may be nil.
	Notice func(string)
}

func (o *Options) check() error {
	if len(o.Branch) > maxBranch {
		return invalidf("branch is %d bytes; at most %d", len(o.Branch), maxBranch)
	}
	if o.Branch != "" {
		o.Branch = strings.TrimPrefix(o.Branch, "refs/heads/")
		if err := plumbing.NewBranchReferenceName(o.Branch).Validate(); err != nil || strings.HasPrefix(o.Branch, "-") ||
			strings.ContainsAny(o.Branch, " ~^:?*[\\") {
			return invalidf("branch %q is not a valid git branch name", o.Branch)
		}
	}
	if len(o.Message) > maxMessage {
		return invalidf("message is %d bytes; at most %d", len(o.Message), maxMessage)
	}
	if strings.IndexFunc(o.Message, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) >= 0 {
		return invalidf("message contains control characters")
	}
	if pr := o.PullRequest; pr != nil {
		if strings.TrimSpace(pr.Title) == "" || len(pr.Title) > maxTitle {
			return invalidf("a pull request needs a title of at most %d bytes", maxTitle)
		}
		if len(pr.Body) > maxBody {
			return invalidf("pull request body is %d bytes; at most %d", len(pr.Body), maxBody)
		}
		if pr.Base != "" && plumbing.NewBranchReferenceName(pr.Base).Validate() != nil {
			return invalidf("base %q is not a valid branch name", pr.Base)
		}
	}
	return nil
}

// pushedRef records, in the audit repository, the last commit this
// session pushed to branch: a later push may build on it, and only on it.
func pushedRef(branch string) plumbing.ReferenceName {
	return plumbing.ReferenceName("refs/warren/pushed/" + branch)
}

// ErrNothing says the workspace has nothing new to push.
var ErrNothing = errs.New(errs.Conflict, "nothing to push")

// Push commits owner's session's workspace as its identity's author on top
// of the cloned commit (or of this session's last push to the branch) and
// pushes it; it never overwrites commits it did not push itself.
func (s *Service) Push(ctx context.Context, owner string, o Options) (Result, error) {
	if err := o.check(); err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, pushTimeout)
	defer cancel()
	var res Result
	err := s.Sessions.WithPushBase(ctx, owner, o.SessionID, func(ctx context.Context, b sessions.PushBase) error {
		var err error
		if res, err = s.push(ctx, owner, o, b); err != nil {
			return err
		}
		// Recorded under the session's lock: its pushes are numbered in order.
		return s.Store.record(ctx, owner, o.SessionID, res)
	})
	if err != nil {
		return Result{}, err
	}
	if o.PullRequest != nil {
		// The branch is pushed and recorded whatever the forge says.
		pr, err := s.openPR(ctx, owner, o, res)
		if err != nil {
			return res, fmt.Errorf("pushed %s to branch %s of %s, but the pull request failed: %w", res.Commit[:12],
				res.Branch, res.Remote, err)
		}
		res.PullRequest = pr
		if err := s.Store.setPR(ctx, o.SessionID, res.Commit, pr); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (s *Service) identityOf(ctx context.Context, owner, sessionID, name string) (identity.Identity, error) {
	if name != "" {
		return s.Identities.Get(ctx, owner, name)
	}
	idv, err := s.Store.Linked(ctx, owner, sessionID)
	if err != nil {
		return identity.Identity{}, err
	}
	if idv == "" {
		return identity.Identity{}, invalidf("session %s was not created with an identity: name one (identity) to push with", sessionID)
	}
	return s.Identities.ByID(ctx, owner, idv)
}

func (s *Service) push(ctx context.Context, owner string, o Options, b sessions.PushBase) (Result, error) {
	sess := b.Session
	if sess.Mode != sessions.ModeClone {
		return Result{}, invalidf("session %s is not a clone of a repository (mode %s): there is nothing to push to", sess.ID, sess.Mode)
	}
	remote, err := identity.ParseRemote(sess.Source)
	if err != nil {
		return Result{}, fmt.Errorf("push session %s: %w", sess.ID, err)
	}
	if remote.SSH {
		// A caller who is not the operator reaches public addresses only,
		// over ssh as over https.
		remote.Endpoint.Proxy = workspace.SSHProxy(b.Policy)
	}
	if len(b.Incomplete) > 0 {
		return Result{}, errs.New(errs.Limit, fmt.Sprintf("the workspace could not be recorded whole, so a push "+
			"would delete what was left out: %s", strings.Join(b.Incomplete, "; ")))
	}
	id, err := s.identityOf(ctx, owner, sess.ID, o.Identity)
	if err != nil {
		return Result{}, err
	}
	repo := b.Audit.Repo()
	up, err := repo.Reference(workspace.UpstreamRef, true)
	if err != nil {
		return Result{}, invalidf("session %s was cloned without an identity, so the commit it started from was "+
			"not kept: create the session with an identity to push its work", sess.ID)
	}
	st := repo.Storer
	upC, err := object.GetCommit(st, up.Hash())
	if err != nil {
		return Result{}, fmt.Errorf("read the cloned commit: %w", err)
	}
	baseRef, err := repo.Reference(workspace.BaseRef, true)
	if err != nil {
		return Result{}, fmt.Errorf("read the audit base: %w", err)
	}
	baseC, err := object.GetCommit(st, baseRef.Hash())
	if err != nil {
		return Result{}, fmt.Errorf("read the audit base: %w", err)
	}
	snapC, err := object.GetCommit(st, plumbing.NewHash(b.Snapshot))
	if err != nil {
		return Result{}, fmt.Errorf("read the snapshot: %w", err)
	}
	m := &merger{st: st}
	tree, err := m.merge(upC.TreeHash, baseC.TreeHash, snapC.TreeHash, "")
	if err != nil {
		return Result{}, err
	}
	if tree.IsZero() {
		return Result{}, invalidf("the workspace is empty: pushing it would delete every file of the branch")
	}

	branch := o.Branch
	if branch == "" {
		branch = "warren/" + sess.ID
	}
	target := plumbing.NewBranchReferenceName(branch)
	auth, err := s.auth(ctx, id, sess.Source, o.Notice)
	if err != nil {
		return Result{}, err
	}
	cli, err := client.NewClient(remote.Endpoint)
	if err != nil {
		return Result{}, fmt.Errorf("push to %s: %w", remote.URL, err)
	}
	rp, err := cli.NewReceivePackSession(remote.Endpoint, auth)
	if err != nil {
		return Result{}, remoteError(remote, err)
	}
	defer rp.Close()
	ar, err := rp.AdvertisedReferencesContext(ctx)
	if err != nil {
		return Result{}, remoteError(remote, err)
	}
	old, exists := ar.References[target.String()]
	parent := upC
	if exists {
		mine, err := repo.Reference(pushedRef(branch), true)
		if err != nil || mine.Hash() != old {
			return Result{}, errs.New(errs.Conflict, fmt.Sprintf("branch %s of %s already exists at %s, a commit "+
				"this session did not push: warren never overwrites other commits; push to another branch", branch,
				remote.Display(), old.String()[:12]))
		}
		if parent, err = object.GetCommit(st, old); err != nil {
			return Result{}, fmt.Errorf("read the last pushed commit: %w", err)
		}
	}
	if parent.TreeHash == tree {
		since := "it was cloned"
		if exists {
			since = "this session's last push to " + branch
		}
		return Result{}, errs.Wrap(errs.Conflict, ErrNothing, "nothing to push: the workspace has no changes since "+since)
	}
	msg := o.Message
	if strings.TrimSpace(msg) == "" {
		msg = "Work of warren session " + sess.ID
		if sess.Name != "" {
			msg += ": " + bound.String(sess.Name, 100)
		}
	}
	sig := object.Signature{Name: id.AuthorName, Email: id.AuthorEmail, When: time.Now()}
	c := &object.Commit{Author: sig, Committer: sig, Message: strings.TrimRight(msg, "\n") + "\n", TreeHash: tree,
		ParentHashes: []plumbing.Hash{parent.Hash}}
	obj := st.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return Result{}, err
	}
	commit, err := st.SetEncodedObject(obj)
	if err != nil {
		return Result{}, err
	}
	objs, err := missing(st, tree, parent.TreeHash)
	if err != nil {
		return Result{}, err
	}
	objs = append(objs, commit)

	req := packp.NewReferenceUpdateRequestFromCapabilities(ar.Capabilities)
	req.Commands = []*packp.Command{{Name: target, Old: old, New: commit}}
	if !exists {
		req.Commands[0].Old = plumbing.ZeroHash
	}
	if err := send(ctx, rp, st, req, objs); err != nil {
		return Result{}, remoteError(remote, err)
	}
	if err := st.SetReference(plumbing.NewHashReference(pushedRef(branch), commit)); err != nil {
		return Result{}, fmt.Errorf("pushed, but could not record it: %w", err)
	}
	s.Log.Info().Str("session", sess.ID).Str("user", owner).Str("identity", id.Name).Str("branch", branch).
		Str("commit", commit.String()).Msg("pushed")
	res := Result{Branch: branch, Commit: commit.String(), Parent: parent.Hash.String(), Remote: remote.Display(),
		URL: webURL(remote, id, branch)}
	if ref, err := st.Reference(workspace.UpstreamBranchRef); err == nil && ref.Type() == plumbing.SymbolicReference {
		res.cloned = ref.Target().Short()
	}
	return res, nil
}

// send streams a pack of objs with the update request and checks the
// server's report.
func send(ctx context.Context, rp transport.ReceivePackSession, st storer.EncodedObjectStorer, req *packp.ReferenceUpdateRequest, objs []plumbing.Hash) error {
	rd, wr := io.Pipe()
	req.Packfile = rd
	done := make(chan error, 1)
	go func() {
		_, err := packfile.NewEncoder(wr, st, false).Encode(objs, 10)
		done <- wr.CloseWithError(err)
	}()
	rs, err := rp.ReceivePack(ctx, req)
	if err != nil {
		rd.Close()
		<-done
		return err
	}
	if err := <-done; err != nil {
		return err
	}
	if rs != nil {
		if err := rs.Error(); err != nil {
			return err
		}
	}
	return nil
}

// remoteError says what failed talking to the remote, without secrets
// (go-git's messages name the URL, which holds no credential here).
func remoteError(r identity.Remote, err error) error {
	switch {
	case errors.Is(err, identity.ErrHostKeyChanged):
		return err
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		return invalidf("push to %s: the remote refused the identity's credentials (is its key or token allowed to "+
			"write there?): %v", r.Display(), err)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return invalidf("push to %s: no repository there (or no access to it)", r.Display())
	}
	return errs.New(errs.Invalid, fmt.Sprintf("push to %s: %v", r.Display(), bound.String(err.Error(), 1024)))
}
