package sessions

import (
	"context"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions/workspace"
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
// The shell and file access are behind it; walking the tree (snapshots,
// diffs, copies) and measuring disk use go through the runner process in
// its jail (jailRunner, tree.go). Suspend and resume of the whole
// workspace join it as they move off the host. Methods take a context where they may cross a
// network; the ones below that do not yet are the local shell's, kept as
// they are.
type Runner interface {
	// Exec runs command in the persistent shell and waits for it, up to
	// opts.Timeout; cancelling ctx interrupts the command, not the shell.
	// It queues behind a running command (fails with sandbox.ErrBusy under
	// opts.NoWait) and starts the shell with its saved state if it is not
	// running.
	Exec(ctx context.Context, command string, opts sandbox.ExecOptions) (sandbox.Result, error)
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
	State() sandbox.State
	// StateVersion counts the changes of State: an unchanged number means
	// an unchanged state.
	StateVersion() uint64
	// Running reports whether the shell's process is up.
	Running() bool
	// Stop ends the shell's process, keeping its state: the next Exec
	// starts it again (how an idle or paused session is suspended).
	Stop()
	// Close ends the shell for good; Exec then fails with sandbox.ErrClosed.
	Close() error
	// LimitFileSize caps the size of any file a command writes.
	LimitFileSize(n int64)
	// Owner is the uid and gid that the workspace's files are made by.
	Owner() (uid, gid int)
	// Files opens the workspace for the file tools; the caller closes
	// it. Nothing starts: files are read and written as the jail's uid
	// would, whether its shell runs or not. ws is the workspace directory
	// as the manager opened and checked it on this host: a runner here
	// opens the files beneath it, never by the workspace's path.
	Files(ws *workspace.LocalDir) (Files, error)
}

// NewRunner makes the runner of a session from its jail profile and
// options (saved state, what to do after each command, the checked
// workspace directory, which it takes over: opts.Workspace); nothing
// starts until the first Exec.
type NewRunner func(p sandbox.Profile, opts sandbox.Options) (Runner, error)

// LocalRunner runs a session's commands in a bwrap jail on this host, and
// reaches its files through an os.Root of the workspace on this host.
func LocalRunner(p sandbox.Profile, opts sandbox.Options) (Runner, error) {
	sh, err := sandbox.NewShell(p, opts)
	if err != nil {
		return nil, err
	}
	return localRunner{Shell: sh}, nil
}

// localRunner is the bwrap shell of a workspace on this host.
type localRunner struct {
	*sandbox.Shell
}

// Files opens the checked workspace directory as the jail sees it.
func (r localRunner) Files(ws *workspace.LocalDir) (Files, error) {
	uid, gid := r.Owner()
	return workspace.OpenFiles(ws.ProcPath(), workspace.Jail{Mount: sandbox.MountPoint, UID: uid, GID: gid})
}

var _ Runner = localRunner{}
