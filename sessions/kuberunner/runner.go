// Package kuberunner runs warren sessions in Kubernetes: a sessions.Runner
// whose workspace is the volume of an agent-sandbox Sandbox (sandbox/kube),
// reached through the runner in the Sandbox's pod over one mutually
// authenticated connection. serve http --runner kubernetes sets it as the
// manager's Config.NewRunner (New) and Config.RemoveRunner (Remove).
//
// The server keeps what it keeps for a local session (the database, the
// audit repository, the first content it cloned or copied); everything
// done to the workspace afterwards is done by the runner in the pod: the
// file tools, tree walks for snapshots and diffs, disk usage, commands.
package kuberunner

import (
	"context"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sandbox/kube"
	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/errs"
)

// apiTimeout bounds a call to the Kubernetes API made where the manager
// gives no context (Stop).
const apiTimeout = 30 * time.Second

// New returns the NewRunner of sessions whose sandboxes sbs makes. A
// session's Sandbox is made (or found, after a restart) on its first use;
// its first content is written into it then, once for the Sandbox's life.
func New(sbs *kube.Sandboxes) sessions.NewRunner {
	return func(p sandbox.Profile, opts sandbox.Options) (sessions.Runner, error) {
		if opts.Session == "" {
			if opts.Workspace != nil {
				opts.Workspace.Close()
			}
			return nil, errs.New(errs.Internal, "a Kubernetes runner needs the session's id")
		}
		if _, err := kube.Name(opts.Session); err != nil {
			if opts.Workspace != nil {
				opts.Workspace.Close()
			}
			return nil, err
		}
		st := sessions.ShellState{Cwd: sandbox.MountPoint}
		if opts.State != nil {
			st = sessions.ShellState(*opts.State)
		}
		st.Env = maps.Clone(st.Env)
		return &Runner{sbs: sbs, id: opts.Session, ws: opts.Workspace, after: opts.AfterCommand,
			readOnly: p.ReadOnlyWorkspace, state: st, turn: make(chan struct{}, 1)}, nil
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

// Runner is one session's runner in its Kubernetes sandbox.
type Runner struct {
	sbs      *kube.Sandboxes
	id       string
	after    func() string // sandbox.Options.AfterCommand
	readOnly bool          // archived: no command runs
	turn     chan struct{} // holds a token while a command runs: none is Busy

	// opening serializes making the Sandbox, resuming it and writing its
	// first content; held while waiting for the API and the pod.
	opening sync.Mutex
	// mu guards the fields below; never held while waiting.
	mu      sync.Mutex
	ws      *os.File // the host directory of the first content, until written
	sb      *kube.Sandbox
	seeded  bool
	stopped bool // Stop suspended the Sandbox: the next use resumes it
	closed  bool
	state   sessions.ShellState
	version uint64
	bg      bool  // processes left behind by the last command
	fsize   int64 // LimitFileSize, applied before the next command
}

var _ sessions.Runner = (*Runner)(nil)

// Runner is the connection to the session's runner in its pod: it makes
// the Sandbox on first use, resumes it when it was stopped (or found
// suspended after a restart), waits for the pod, and writes the
// session's first content once. It is how snapshots, diffs and the quota
// reach the workspace (the manager's jailRunner).
func (r *Runner) Runner(ctx context.Context) (*client.Conn, error) {
	if c := r.LiveRunner(); c != nil {
		return c, nil
	}
	r.opening.Lock()
	defer r.opening.Unlock()
	r.mu.Lock()
	sb, stopped, seeded, closed := r.sb, r.stopped, r.seeded, r.closed
	r.mu.Unlock()
	if closed {
		return nil, sessions.ErrRunnerClosed
	}
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
		// Suspended by this server before a restart, or by another: the
		// session is in use again.
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
			return nil, err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		sb.Disconnect()
		return nil, sessions.ErrRunnerClosed
	}
	r.sb, r.stopped, r.seeded = sb, false, true
	return conn, nil
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

// LiveRunner is the connection to the runner while it is up, else nil;
// it never makes, resumes or dials anything.
func (r *Runner) LiveRunner() *client.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sb == nil || r.closed || r.stopped || !r.seeded {
		return nil
	}
	return r.sb.Live()
}

// Files reaches the workspace through the runner in the pod.
func (r *Runner) Files(ctx context.Context) (sessions.Files, error) {
	c, err := r.Runner(ctx)
	if err != nil {
		return nil, err
	}
	return sessions.RunnerFiles(c), nil
}

// Running reports whether the session's pod is up and connected.
func (r *Runner) Running() bool { return r.LiveRunner() != nil }

// Stop suspends the session's Sandbox (operatingMode Suspended): its pod
// stops, its volume stays, and the next use resumes it. It returns once
// the API server has the change, not when the pod is gone.
func (r *Runner) Stop() {
	r.opening.Lock()
	defer r.opening.Unlock()
	r.mu.Lock()
	sb := r.sb
	r.mu.Unlock()
	if sb == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	err := sb.Stop(ctx)
	r.mu.Lock()
	// A Sandbox whose change failed is still running: the next use finds
	// it so and dials it again.
	r.stopped = err == nil
	r.bg = false
	r.mu.Unlock()
}

// Close lets the session go from this server: it closes the connection
// and keeps the Sandbox as it is (the server stops, the session is
// archived or deleted: deletion removes the Sandbox through Remove).
func (r *Runner) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if r.sb != nil {
		r.sb.Disconnect()
	}
	if r.ws != nil {
		r.ws.Close()
		r.ws = nil
	}
	return nil
}

// State is the shell's cwd and exports as the last command left them.
func (r *Runner) State() sessions.ShellState {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state
	st.Env = maps.Clone(st.Env)
	return st
}

// StateVersion counts the changes of State.
func (r *Runner) StateVersion() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.version
}

// Busy reports whether a command runs.
func (r *Runner) Busy() bool { return len(r.turn) == 1 }

// Background reports whether the last command left processes running.
func (r *Runner) Background() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bg
}

// LimitFileSize caps the size of any file a command writes, from the next
// command on.
func (r *Runner) LimitFileSize(n int64) {
	r.mu.Lock()
	r.fsize = n
	r.mu.Unlock()
}

// Owner is who the pod's files are made by: the template's user.
func (r *Runner) Owner() (uid, gid int) { return podUID, podUID }

// podUID is the user and group the deployment's SandboxTemplate runs the
// runner as (sandbox/kube/deploy/sandbox-template.yaml).
const podUID = 10001

// Prepare makes session id's Sandbox (from the template, or claimed from
// the warm pool) and its runner's certificate as the session is created,
// without waiting for its pod: the manager's Config.PrepareRunner.
func Prepare(sbs *kube.Sandboxes) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		_, err := sbs.Create(ctx, id)
		return err
	}
}

// Configure sets what cfg needs for sessions in the sandboxes of sbs:
// their runners, the Sandbox made at create and removed at delete, and no
// bind mode (no directory of this host reaches a pod).
func Configure(cfg *sessions.Config, sbs *kube.Sandboxes) {
	cfg.NewRunner, cfg.PrepareRunner, cfg.RemoveRunner = New(sbs), Prepare(sbs), Remove(sbs)
	cfg.NoBind = true
}
