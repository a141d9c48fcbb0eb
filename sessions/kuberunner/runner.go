// Package kuberunner runs warren sessions in Kubernetes: a sessions.Runner
// whose workspace is the volume of an agent-sandbox Sandbox (sandbox/kube),
// reached through the runner in the Sandbox's pod over one mutually
// authenticated connection. serve http --runner kubernetes sets a manager
// up with it (Configure).
//
// Commands run in the runner's own shell over that connection
// (sessions.NetRunner, the same shell protocol and checks as a local
// jail's); the file tools, the tree walks of snapshots and diffs, and the
// disk usage go through the same connection. The server keeps what it
// keeps for a local session: the database, the audit repository, and the
// first content it cloned, which it sends to the pod once (seed.go).
package kuberunner

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sandbox/kube"
	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/errs"
)

// Bounds of the waits for the cluster.
const (
	// apiTimeout bounds a call to the Kubernetes API made where the
	// manager gives no context (Stop).
	apiTimeout = 30 * time.Second
	// podWait bounds a connection's wait for the session's pod (made or
	// resumed: scheduled, its image pulled, its volume attached) and the
	// writing of its first content. The shell asks for a connection with
	// a deadline made for a local jail's start; only a cancel of the
	// caller's context ends this wait before podWait.
	podWait = 5 * time.Minute
)

// Configure sets what cfg needs for sessions in the sandboxes of sbs:
// their runners, the Sandbox made at create and removed at delete, no
// bind mode (no directory of this host reaches a pod), and the network
// modes pods can have: none, and allowlist when sbs's pods reach warren's
// egress proxy (kube.Config.EgressProxy; serve it with ServeEgress),
// through cfg.Network.Proxy as for a local jail. A pod's network is
// otherwise its NetworkPolicy's, so a session asking for the host's
// network, or for an allowlist without the proxy, is refused rather than
// given none silently.
func Configure(cfg *sessions.Config, sbs *kube.Sandboxes) {
	cfg.NewRunner, cfg.PrepareRunner, cfg.RemoveRunner = New(sbs), Prepare(sbs), Remove(sbs)
	cfg.NoBind = true
	cfg.Network.AllowHost = false
	if sbs.Egress() == "" {
		cfg.Network.Proxy = nil
	}
	cfg.Network.Unavailable = map[sessions.NetworkMode]string{
		sessions.NetHost: "network mode host is not available for sessions in Kubernetes pods (a pod's network is its " +
			"NetworkPolicy's): use mode allowlist with the hosts you need",
		sessions.NetAllowlist: "network mode allowlist needs warren's egress proxy served to the pods: ask the operator to " +
			"start warren with --kube-proxy-listen and --kube-proxy-addr (see docs/kubernetes.md)",
	}
}

// New returns the NewRunner of sessions whose sandboxes sbs makes. A
// session's Sandbox is made (or found, after a restart) by Prepare or on
// its first use; its first content is written into it then, once for the
// Sandbox's life.
func New(sbs *kube.Sandboxes) sessions.NewRunner {
	return func(p sandbox.Profile, opts sandbox.Options) (sessions.Runner, error) {
		// The Sandbox is named after the session (sandbox.Options.Session,
		// which the manager sets): an id that cannot name one is refused.
		if _, err := kube.Name(opts.Session); err != nil {
			if opts.Workspace != nil {
				opts.Workspace.Close()
			}
			return nil, err
		}
		if p.Egress != nil {
			// The pod's runner listens on the pod's loopback at the
			// template's port (kube.EgressPort): the shell's proxy
			// variables name it, as in a local jail.
			p.Env = withEnv(p.Env, (&sandbox.Egress{Port: kube.EgressPort}).ProxyEnv())
			p.Egress = nil
		}
		r := &Runner{sbs: sbs, id: opts.Session, ws: opts.Workspace}
		opts.Workspace = nil // kept for the first content; the shell has no use for it
		sh, err := sessions.NetRunner(p, r.dial, opts)
		if err != nil {
			r.closeWorkspace()
			return nil, err
		}
		jr, ok := sh.(shellConn)
		if !ok {
			r.closeWorkspace()
			return nil, errs.New(errs.Internal, "the network shell does not reach its runner")
		}
		r.shell, r.conn = sh, jr
		return r, nil
	}
}

// Prepare makes session id's Sandbox (from the template, or claimed from
// the warm pool) and its runner's certificate as the session is created,
// without waiting for its pod: the manager's Config.PrepareRunner.
func Prepare(sbs *kube.Sandboxes) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		_, err := sbs.Create(ctx, id)
		return err
	}
}

// Remove deletes session id's Sandbox and its runner's certificate: the
// manager's Config.RemoveRunner, called when the session is deleted.
func Remove(sbs *kube.Sandboxes) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		if _, err := kube.Name(id); err != nil {
			return nil // no sandbox was ever made for it
		}
		sb, err := sbs.Open(ctx, id)
		if errs.CodeOf(err) == errs.NotFound {
			return nil // a warm-pool claim already gone
		}
		if err != nil {
			return err
		}
		return sb.Delete(ctx)
	}
}

// shell is the network shell a Runner is built on.
type shell = sessions.Runner

// shellConn is how the network shell's runner connection is reached (the
// manager's jailRunner): the tree walks and disk usage use it.
type shellConn interface {
	Runner(ctx context.Context) (*client.Conn, error)
	LiveRunner() *client.Conn
}

// Runner is one session's runner in its Kubernetes sandbox: the network
// shell (sessions.NetRunner) whose dialer makes, resumes and waits for
// the session's Sandbox, and whose Stop suspends it.
type Runner struct {
	shell
	conn shellConn
	sbs  *kube.Sandboxes
	id   string

	// opening serializes making the Sandbox, resuming it and writing its
	// first content; held while waiting for the API and the pod.
	opening sync.Mutex
	// mu guards the fields below; never held while waiting.
	mu      sync.Mutex
	ws      *os.File // the host directory of the first content, until Close
	sb      *kube.Sandbox
	seeded  bool
	stopped bool // Stop suspended the Sandbox: the next connection resumes it
}

var _ sessions.Runner = (*Runner)(nil)

// Runner is the connection to the runner in the session's pod, made (and
// the pod made or resumed) if there is none: how snapshots, diffs and the
// quota reach the workspace.
func (r *Runner) Runner(ctx context.Context) (*client.Conn, error) { return r.conn.Runner(ctx) }

// LiveRunner is the connection while it is up, else nil; it never dials.
func (r *Runner) LiveRunner() *client.Conn { return r.conn.LiveRunner() }

// dial is the shell's Dialer: it makes the Sandbox on first use, resumes
// it when it was stopped (or found suspended after a restart), waits for
// the pod, connects to its runner, and writes the session's first content
// once.
func (r *Runner) dial(ctx context.Context) (*client.Conn, error) {
	ctx, cancel := podContext(ctx)
	defer cancel()
	r.opening.Lock()
	defer r.opening.Unlock()
	r.mu.Lock()
	sb, stopped, seeded := r.sb, r.stopped, r.seeded
	r.mu.Unlock()
	if sb == nil {
		var err error
		if sb, err = r.sbs.Create(ctx, r.id); err != nil {
			return nil, err
		}
	}
	if stopped {
		if err := sb.Resume(ctx); err != nil {
			return nil, err
		}
	}
	conn, err := sb.Runner(ctx)
	if errs.CodeOf(err) == errs.Conflict {
		// Suspended before this server started, or by another replica:
		// the session is in use again.
		if err := sb.Resume(ctx); err != nil {
			return nil, err
		}
		conn, err = sb.Runner(ctx)
	}
	if err != nil {
		return nil, err
	}
	if !seeded {
		if err := r.seed(ctx, sb, conn); err != nil {
			sb.Disconnect()
			return nil, err
		}
	}
	r.mu.Lock()
	r.sb, r.stopped, r.seeded = sb, false, true
	r.mu.Unlock()
	return conn, nil
}

// podContext is ctx without its deadline (made for a local jail's start)
// but with its cancel, bounded by podWait.
func podContext(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), podWait)
	stop := context.AfterFunc(ctx, func() {
		if ctx.Err() == context.Canceled {
			cancel()
		}
	})
	return c, func() { stop(); cancel() }
}

// seed writes the session's first content into its Sandbox's volume,
// unless the Sandbox says it holds it already (made before a restart, or
// by another replica), and records that it does.
func (r *Runner) seed(ctx context.Context, sb *kube.Sandbox, conn *client.Conn) error {
	done, err := sb.Seeded(ctx)
	if err != nil || done {
		return err
	}
	r.mu.Lock()
	ws := r.ws
	r.mu.Unlock()
	if ws == nil {
		return errs.New(errs.Internal, "the session's sandbox "+sb.Name+" does not hold its files, and this server no longer has them to send")
	}
	if err := seed(ctx, conn, ws); err != nil {
		return err
	}
	return sb.MarkSeeded(ctx)
}

// Stop ends the shell, keeping its state, and suspends the session's
// Sandbox (operatingMode Suspended): its pod stops, its volume stays, and
// the next use resumes it. It returns once the API server has the change,
// not once the pod is gone. A shell running a command is not stopped.
func (r *Runner) Stop() {
	r.shell.Stop()
	r.opening.Lock()
	defer r.opening.Unlock()
	r.mu.Lock()
	sb := r.sb
	r.mu.Unlock()
	// A command holds the shell (Stop left it), or one connected since:
	// its pod stays.
	if sb == nil || r.shell.Running() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	// A Sandbox whose change failed still runs: the next connection
	// finds it so.
	err := sb.Stop(ctx)
	r.mu.Lock()
	r.stopped = err == nil
	r.mu.Unlock()
}

// Close lets the session go from this server: it ends the shell and its
// connection and keeps the Sandbox as it is (the server stops, or the
// session is archived; a deleted session's Sandbox goes through Remove).
func (r *Runner) Close() error {
	err := r.shell.Close()
	r.mu.Lock()
	if r.sb != nil {
		r.sb.Disconnect()
	}
	r.mu.Unlock()
	r.closeWorkspace()
	return err
}

func (r *Runner) closeWorkspace() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ws != nil {
		r.ws.Close()
		r.ws = nil
	}
}
