package sandbox

import (
	"context"

	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sessions/errs"
)

// ErrRunnerKilled is what Runner fails with when a running command has
// stopped the jail's runner (kill -9 -1 kills everything of the jail's
// uid): the runner comes back with the jail once the command has ended.
var ErrRunnerKilled = errs.New(errs.Unavailable, "a command in this session stopped the session's runner (the process that "+
	"does the workspace's file work); it starts again once the running command ends: wait for it or interrupt it, then retry")

// Runner returns the connection to the runner of the shell's jail,
// starting the jail (with the saved state) if it is not running. It does
// not wait behind a running command: the runner serves its requests while
// the command runs. A jail whose runner a command killed is restarted when
// no command runs; while one does, Runner fails with ErrRunnerKilled.
func (s *Shell) Runner(ctx context.Context) (*client.Conn, error) {
	if c := s.LiveRunner(); c != nil {
		return c, nil
	}
	s.mu.Lock()
	jailUp := s.jail != nil && s.jail.alive()
	s.mu.Unlock()
	// With the jail up, its runner is gone: restarting the jail would end
	// the command, so only an idle shell is restarted. With no jail,
	// nothing runs, and the start waits only for the turn.
	if err := s.acquire(ctx, jailUp); err != nil {
		if jailUp && err == ErrBusy {
			return nil, ErrRunnerKilled
		}
		return nil, err
	}
	defer s.release()
	s.mu.Lock()
	j := s.jail
	if j != nil && j.runner != nil && isDone(j.runner.Done()) {
		s.jail = nil // the runner is gone: a fresh jail, with the saved state
	} else {
		j = nil
	}
	s.mu.Unlock()
	if j != nil {
		j.kill()
	}
	j, err := s.startTraced(ctx) // a jail started for its runner is counted as any other
	if err != nil {
		return nil, err
	}
	if j.runner == nil {
		return nil, errs.New(errs.Internal, "the jail started without its runner")
	}
	return j.runner, nil
}

// LiveRunner returns the connection to the runner of the running jail, or
// nil when no jail runs or its runner is gone; it never starts one (for
// callers that run inside a command's turn, such as the quota's measure
// after each command).
func (s *Shell) LiveRunner() *client.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.jail == nil || !s.jail.alive() || s.jail.runner == nil || isDone(s.jail.runner.Done()) {
		return nil
	}
	return s.jail.runner
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
