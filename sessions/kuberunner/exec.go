package kuberunner

import (
	"context"

	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/errs"
)

// ErrNoShell is what a command gets until commands reach the runner's own
// shell over its connection.
var ErrNoShell = errs.New(errs.Unavailable, "commands on kubernetes need the runner-owned shell, which this build does not have yet: "+
	"the session's files, diffs and snapshots work; run commands in a local session")

// Exec runs command in the pod's shell.
func (r *Runner) Exec(ctx context.Context, command string, opts sessions.RunOptions) (sessions.CommandResult, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return sessions.CommandResult{}, sessions.ErrRunnerClosed
	}
	return sessions.CommandResult{}, ErrNoShell
}

// StopAll ends every process of the shell; there are none without one.
func (r *Runner) StopAll(note string) bool { return false }
