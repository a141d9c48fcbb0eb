package mcp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/tasks"
)

// This file is the one place where errors become tool error text. Domain
// packages return coded errors (package errs) whose messages say what is
// wrong; here a code, and for some the domain sentinel, adds what a model
// does next with warren's tools, whose names the domain does not know.

// userError is an error whose message is meant for the caller as is.
type userError struct {
	msg string
	err error // the cause, for errors.Is; may be nil
}

func (e *userError) Error() string { return e.msg }

func (e *userError) Unwrap() error { return e.err }

// errorf builds a userError: say what went wrong and what to do.
func errorf(format string, args ...any) error {
	return &userError{msg: fmt.Sprintf(format, args...)}
}

// fileError completes an error of a session's files (a
// *sessions.FileError) with what to do next with the tools; tool is what
// refuses a file over its limit ("read_file"). Other errors pass as they
// are, to toolMessage.
func fileError(tool string, err error) error {
	var fe *sessions.FileError
	if !errors.As(err, &fe) {
		return err
	}
	msg := fe.Error()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		msg += ", or create it with write_file"
	case errors.Is(err, sessions.ErrTooManyLinks):
		msg += ": look at them with shell_exec 'ls -l'"
	case errors.Is(err, sessions.ErrTooBig) && fe.Size > 0:
		msg = fmt.Sprintf("%s is %d bytes, over %s's limit of %d: use shell_exec (head, sed -n, grep) instead", fe.Path, fe.Size, tool, fe.Limit)
	case errors.Is(err, sessions.ErrTooBig):
		msg = fmt.Sprintf("%s grew past %s's limit of %d bytes while it was read", fe.Path, tool, fe.Limit)
	case errors.Is(err, sessions.ErrNotRegular) && fe.Type.IsDir():
		if fe.Op == "read" { // a write says "a directory, not a file"
			msg += fmt.Sprintf(": list it with shell_exec 'ls -la %s'", fe.Jail)
		}
	case errors.Is(err, sessions.ErrNotRegular):
		msg += fmt.Sprintf(": inspect it with shell_exec, e.g. 'ls -l %s'", fe.Jail)
	}
	return &userError{msg: msg, err: err}
}

// toolMessage translates an error into a message that says what to do.
func toolMessage(err error) string {
	var ue *userError
	if errors.As(err, &ue) {
		return ue.msg
	}
	if errors.Is(err, context.Canceled) {
		return "the call was cancelled"
	}
	switch errs.CodeOf(err) {
	case errs.NotFound:
		switch {
		case errors.Is(err, sessions.ErrNotFound):
			return "session not found: omit session_id to use your default session, or pass the id a previous result returned"
		case errors.Is(err, tasks.ErrNotFound):
			return err.Error() + ": list the tasks with task_list"
		}
	case errs.Busy:
		var claimed *tasks.ClaimedError
		var left *sessions.JobRunningError
		switch {
		case errors.Is(err, sessions.ErrRunnerBusy):
			return "the session's shell is busy running another command: wait for it with shell_wait, stop it with shell_kill, or use another session"
		case errors.As(err, &left):
			return fmt.Sprintf("session %s is busy with job %s, a command left running in the background: wait for it with "+
				"shell_wait {\"job_id\":%q}, stop it with shell_kill, or run this in another session", left.Session, left.Job, left.Job)
		case errors.As(err, &claimed):
			return fmt.Sprintf("%s is claimed by %s until %s: pick another task (task_list {\"status\":\"open\"}), or wait until the lease ends",
				claimed.TaskID, claimed.Holder, claimed.Until.UTC().Format(time.RFC3339))
		case errors.Is(err, tasks.ErrClaimed):
			return err.Error() + ": claim it with task_claim first (a claim you held may have expired)"
		}
	case errs.Conflict:
		if errors.Is(err, tasks.ErrConflict) {
			return err.Error() + " (edit TASKS.md, or run 'warren task sync --keep-file ID' or '--keep-board ID')"
		}
	case errs.Invalid:
		switch {
		case errors.Is(err, sessions.ErrEmptyCommand):
			return "command is empty: pass a shell command such as 'ls -la'"
		case errors.Is(err, sessions.ErrNULInCommand):
			return "command contains a NUL byte, which no shell can run: remove it"
		}
	case errs.Limit:
		var blocked *sessions.UsageBlockedError
		if errors.As(err, &blocked) {
			return "shell_exec refused: " + blocked.Reason + ". The threshold is enforced: " +
				"ask the operator to raise or remove it in warren's config file, wait for the next UTC day if it is daily, " +
				"or see 'warren usage alerts'"
		}
	case errs.Unavailable:
		if errors.Is(err, sessions.ErrRunnerClosed) {
			return "the session's shell was closed because the server is shutting down: retry after it restarts"
		}
	}
	return err.Error()
}
