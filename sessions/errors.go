package sessions

import (
	"fmt"

	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/sessions/workspace"
)

// ErrInvalidTransition marks a lifecycle action the session's state does
// not allow (pausing a paused session, writing in an archived one, ...).
var ErrInvalidTransition = errs.New(errs.Conflict, "invalid session state for this action")

// StateError says why an action is refused in a session's current state.
// Its message names the session, its state and what to do instead.
type StateError struct {
	ID     string
	State  State
	Action string // pause, resume, archive, delete, run, write
}

func (e *StateError) Error() string {
	verb := map[string]string{"run": "run commands in", "write": "write files in", "read files": "read files of"}[e.Action]
	if verb == "" {
		verb = e.Action
	}
	switch {
	case e.State == StateDeleted:
		return fmt.Sprintf("cannot %s session %s: it was deleted and its workspace is gone; create a new session with session_create", verb, e.ID)
	case e.Action == "run" || e.Action == "write":
		if e.State == StatePaused {
			return fmt.Sprintf("cannot %s session %s: it is paused; resume it first with session_control "+
				`{"session_id":%q,"action":"resume"}`, verb, e.ID, e.ID)
		}
		return fmt.Sprintf("cannot %s session %s: it is archived and read-only; read its files or session_diff it, "+
			"or create a new session with session_create", verb, e.ID)
	case e.Action == "resume":
		return fmt.Sprintf("cannot resume session %s: it is %s, and only a paused session can be resumed", e.ID, e.State)
	case e.Action == "pause":
		return fmt.Sprintf("cannot pause session %s: it is %s, and only an active session can be paused", e.ID, e.State)
	case e.Action == "archive":
		return fmt.Sprintf("cannot archive session %s: it is %s already", e.ID, e.State)
	}
	return fmt.Sprintf("cannot %s session %s: it is %s", verb, e.ID, e.State)
}

// Is makes errors.Is(err, ErrInvalidTransition) true for a StateError.
func (e *StateError) Is(target error) bool { return target == ErrInvalidTransition }

// ErrorCode implements errs.Coder: the session's state refuses the action.
func (e *StateError) ErrorCode() errs.Code { return errs.Conflict }

// ErrLimit marks a refusal by a configured cap (sessions per user, running
// shells, disk quota).
var ErrLimit = errs.New(errs.Limit, "session limit reached")

// limitf refuses an action by a cap: the message says which cap and what
// to do; errors.Is(err, ErrLimit) is true.
func limitf(format string, a ...any) error {
	return errs.Wrap(errs.Limit, ErrLimit, fmt.Sprintf(format, a...))
}

// ErrBusy is returned when a lifecycle action would cut a running command.
var ErrBusy = errs.New(errs.Busy, "session is running a command")

func busy(id, action string) error {
	return fmt.Errorf("%w: cannot %s session %s while a command runs in it; wait for it (shell_wait) or stop it (shell_kill), then retry",
		ErrBusy, action, id)
}

// invalidf refuses the manager's own input (a name, an action, a network
// mode). Its message is the problem alone: the "invalid workspace:" of
// workspace.ErrInvalid would blame the workspace. It still matches
// workspace.ErrInvalid, as the manager's refusals always have.
func invalidf(format string, a ...any) error {
	return errs.Wrap(errs.Invalid, workspace.ErrInvalid, fmt.Sprintf(format, a...))
}
