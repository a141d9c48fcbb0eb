package identity

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/warrenhq/warren/sessions/errs"
)

func init() {
	// go-git reads the server user's ~/.ssh/config for every ssh URL (host
	// aliases, ports). A clone or push with an identity must depend on
	// nothing of that user's: warren reads no ssh_config at all.
	gitssh.DefaultSSHConfig = nil
}

// maxRemote bounds a remote URL (as sessions bound a source).
const maxRemote = 4 << 10

// Remote is a parsed git remote: what go-git dials and how it logs in.
type Remote struct {
	URL      string // as given
	Endpoint *transport.Endpoint
	SSH      bool
}

// ParseRemote reads an ssh://, scp-like (git@host:path) or https:// URL.
func ParseRemote(raw string) (Remote, error) {
	if len(raw) > maxRemote {
		return Remote{}, errs.New(errs.Invalid, fmt.Sprintf("remote is %d bytes; a git URL is at most %d", len(raw), maxRemote))
	}
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return Remote{}, errs.New(errs.Invalid, fmt.Sprintf("remote %q is not a git URL: %v", raw, err))
	}
	switch ep.Protocol {
	case "ssh":
		return Remote{URL: raw, Endpoint: ep, SSH: true}, nil
	case "https":
		return Remote{URL: raw, Endpoint: ep}, nil
	case "http":
		return Remote{}, errs.New(errs.Invalid, fmt.Sprintf("remote %s: an identity's token is never sent over "+
			"plain http; use the https URL", redact(raw)))
	}
	return Remote{}, errs.New(errs.Invalid, fmt.Sprintf("remote %s: an identity logs in over ssh or https, not %s",
		redact(raw), ep.Protocol))
}

// Display is the remote without any user name, for messages and results.
func (r Remote) Display() string { return redact(r.URL) }

func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		u.User = nil
		return u.String()
	}
	return raw
}

// AuthFor returns how id logs in to r: its key over ssh (host keys
// checked by hk), its token over https. The secrets stay in the returned
// value, in memory.
func AuthFor(ctx context.Context, r Remote, id Identity, sec *Secrets, hk *HostKeys) (transport.AuthMethod, error) {
	if r.SSH {
		if sec.Signer == nil {
			return nil, errs.New(errs.Invalid, fmt.Sprintf("identity %s has no SSH key, and %s is an ssh URL: use "+
				"the repository's https URL (the identity has a token), or an identity with a key", id.Name, redact(r.URL)))
		}
		user := r.Endpoint.User
		if user == "" {
			user = "git"
		}
		hostport := fmt.Sprintf("%s:%d", strings.ToLower(r.Endpoint.Host), portOr(r.Endpoint.Port, 22))
		return &sshAuth{user: user, signer: sec.Signer, callback: hk.Callback(ctx), algos: hk.Algorithms(ctx, hostport)}, nil
	}
	if sec.Token == "" {
		return nil, errs.New(errs.Invalid, fmt.Sprintf("identity %s has no token, and %s is an https URL: give "+
			"the identity a token, or use the repository's ssh URL", id.Name, redact(r.URL)))
	}
	return &githttp.BasicAuth{Username: id.TokenUser, Password: sec.Token}, nil
}

func portOr(p, def int) int {
	if p <= 0 {
		return def
	}
	return p
}

// sshAuth logs in with one key and checks the host key with one
// identity's pins. Nothing of the server user's is consulted: no agent,
// no ~/.ssh.
type sshAuth struct {
	user     string
	signer   ssh.Signer
	callback ssh.HostKeyCallback
	algos    []string
}

func (a *sshAuth) Name() string { return "ssh-identity" }
func (a *sshAuth) String() string {
	return "user: " + a.user + ", key: " + ssh.FingerprintSHA256(a.signer.PublicKey())
}

// ClientConfig implements go-git's ssh AuthMethod.
func (a *sshAuth) ClientConfig() (*ssh.ClientConfig, error) {
	return &ssh.ClientConfig{User: a.user, Auth: []ssh.AuthMethod{ssh.PublicKeys(a.signer)},
		HostKeyCallback: a.callback, HostKeyAlgorithms: a.algos}, nil
}
