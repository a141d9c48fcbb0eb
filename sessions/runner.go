package sessions

import (
	"context"
	"errors"

	"github.com/warrenhq/warren/sandbox"
)

// Runner is what a session needs from whatever runs its commands: the seam
// between a session and where its workspace lives. Today's runner is the
// local bwrap jail, a *sandbox.Shell (LocalRunner); a runner elsewhere than
// this host (a small warren process inside a pod, reached over one
// persistent connection) is another implementation of this interface, set
// in Config.NewRunner, not a change to the manager.
//
// A Runner must be comparable with == (a pointer, or a struct of them):
// the manager tells a session's live runner from an older one that way.
//
// A Runner runs one command at a time; the manager owns a command's life
// around it (exec.go: one queue per session, jobs and yield, the state save
// and the usage checks), so that every runner is used the same way by the
// MCP tools, the CLI, the agent and the console.
//
// The shell and file access are behind it; walking the tree (snapshots,
// diffs, copies) and measuring disk use go through the runner process in
// its jail (jailRunner, tree.go). Suspend and resume of the whole
// workspace join it as they move off the host. Methods take a context where they may cross a
// network; the ones below that do not yet are the local shell's, kept as
// they are.
type Runner interface {
	// Exec runs command in the persistent shell and waits for it, up to
	// opts.Timeout (or until opts.DetachAt: then ErrDetached, and
	// opts.Detached gets the result); cancelling ctx interrupts the
	// command, not the shell. The manager calls it one command at a time
	// per session (its queue, jobs.go); a runner still refuses a second.
	// It queues behind a running command (fails with ErrRunnerBusy under
	// opts.NoWait), starts the shell with its saved state if it is not
	// running, and fails with ErrRunnerClosed after Close.
	Exec(ctx context.Context, command string, opts RunOptions) (CommandResult, error)
	// Busy reports whether a command is running.
	Busy() bool
	// Background reports whether processes a finished command left behind
	// are still running.
	Background() bool
	// StopAll ends every process of the shell (note says why, in its
	// output) and reports whether there were any.
	StopAll(note string) bool
	// State is the shell's cwd and exported variables, saved by the
	// manager so that a restarted shell resumes where it was.
	State() ShellState
	// StateVersion counts the changes of State: an unchanged number means
	// an unchanged state.
	StateVersion() uint64
	// Running reports whether the shell's process is up.
	Running() bool
	// Stop ends the shell's process, keeping its state: the next Exec
	// starts it again (how an idle or paused session is suspended).
	Stop()
	// Close ends the shell for good; Exec then fails with ErrRunnerClosed.
	Close() error
	// LimitFileSize caps the size of any file a command writes.
	LimitFileSize(n int64)
	// Owner is the uid and gid that the workspace's files are made by.
	Owner() (uid, gid int)
	// Files reaches the workspace for the file tools: its runner does
	// the file work inside the jail, which starts (with its saved state)
	// when it is not running; a running command does not hold it up.
	Files(ctx context.Context) (Files, error)
}

// NewRunner makes the runner of a session from its jail profile and
// options (saved state, what to do after each command, the checked
// workspace directory, which it takes over: opts.Workspace); nothing
// starts until the first Exec. The profile is the jail's description
// (mounts, limits, network), which a runner elsewhere maps to its own.
type NewRunner func(p sandbox.Profile, opts sandbox.Options) (Runner, error)

// LocalRunner runs a session's commands in a bwrap jail on this host, and
// reaches its files through the runner inside that jail.
func LocalRunner(p sandbox.Profile, opts sandbox.Options) (Runner, error) {
	sh, err := sandbox.NewShell(p, opts)
	if err != nil {
		return nil, err
	}
	return shellRunner{Shell: sh}, nil
}

// NetRunner runs a session's commands in the shell of a runner on the
// network (a pod's `warren-runner --listen`), and reaches its files
// through the same connection: dial connects to it (client.DialTLS with
// the session's certificates), once per connection the session needs (the
// first command, and again after the runner hung up or was restarted: the
// new shell starts from the saved state). It is the same Runner as the
// local jail's, over sandbox.NewNetShell: one protocol, one conformance
// suite (sessions/runnersuite). p gives the shell its environment and
// limits; opts its saved state and after-command hook.
func NetRunner(p sandbox.Profile, dial sandbox.Dialer, opts sandbox.Options) (Runner, error) {
	sh, err := sandbox.NewNetShell(p, dial, opts)
	if err != nil {
		return nil, err
	}
	return shellRunner{Shell: sh}, nil
}

// shellRunner is a *sandbox.Shell as a Runner: the bwrap jail on this
// host (LocalRunner) or a runner on the network (NetRunner).
type shellRunner struct {
	*sandbox.Shell
}

// Exec runs command in the jail's shell, translating warren's options and
// results to and from the shell's.
func (r shellRunner) Exec(ctx context.Context, command string, o RunOptions) (CommandResult, error) {
	opts := sandbox.ExecOptions{Timeout: o.Timeout, NoWait: o.NoWait, DetachAt: o.DetachAt, MaxOutput: MaxOutput}
	if f := o.OnOutput; f != nil {
		opts.OnOutput = func(s sandbox.Stream, chunk []byte) { f(Stream(s), chunk) }
	}
	if f := o.Detached; f != nil {
		opts.Detached = func(res sandbox.Result, err error) { f(CommandResult(res), runnerError(err)) }
	}
	res, err := r.Shell.Exec(ctx, command, opts)
	return CommandResult(res), runnerError(err)
}

// State is the shell's cwd and exports.
func (r shellRunner) State() ShellState { return ShellState(r.Shell.State()) }

// runnerError translates the shell's errors into the Runner's.
func runnerError(err error) error {
	for _, e := range [...][2]error{{sandbox.ErrBusy, ErrRunnerBusy}, {sandbox.ErrClosed, ErrRunnerClosed},
		{sandbox.ErrDetached, ErrDetached}, {sandbox.ErrEmptyCommand, ErrEmptyCommand}, {sandbox.ErrNULInCommand, ErrNULInCommand}} {
		if errors.Is(err, e[0]) {
			return e[1]
		}
	}
	return err
}

// Files reaches the workspace through the jail's runner.
func (r shellRunner) Files(ctx context.Context) (Files, error) {
	c, err := r.Shell.Runner(ctx)
	if err != nil {
		return nil, err
	}
	return RunnerFiles(c), nil
}

var _ Runner = shellRunner{}
