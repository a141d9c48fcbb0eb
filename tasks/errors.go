package tasks

import (
	"fmt"
	"strings"
	"time"

	"github.com/warrenhq/warren/sessions/errs"
)

// Code is warren's error code (package errs), so that the MCP tools and
// the CLI turn board errors into clear messages without matching strings.
type Code = errs.Code

// The board's error codes, in warren's vocabulary.
const (
	CodeNotFound = errs.NotFound // unknown task id
	CodeInvalid  = errs.Invalid  // bad input: empty title, bad status, bad id, bad file
	CodeConflict = errs.Conflict // the same task changed in the file and on the board
	CodeClaimed  = errs.Busy     // another holder has the task, or the caller has no claim
)

// Error is the board's error type. Message is written for people and says
// what to do when that helps.
type Error struct {
	Code    Code
	TaskID  string // the task concerned, if any
	Message string
	Err     error // underlying cause, if any
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode implements errs.Coder.
func (e *Error) ErrorCode() Code { return e.Code }

// Is makes errors.Is(err, ErrNotFound) and friends match by code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is; every error of the board matches the one of its
// code, including *ClaimedError and *ConflictError.
var (
	ErrNotFound = &Error{Code: CodeNotFound, Message: "task not found"}
	ErrInvalid  = &Error{Code: CodeInvalid, Message: "invalid input"}
	ErrConflict = &Error{Code: CodeConflict, Message: "conflicting edits"}
	ErrClaimed  = &Error{Code: CodeClaimed, Message: "task is claimed"}
)

// ClaimedError says that another holder has a live claim on the task.
type ClaimedError struct {
	TaskID string
	Holder Holder
	Until  time.Time // when the lease ends unless renewed
}

// Error implements error.
func (e *ClaimedError) Error() string {
	return fmt.Sprintf("%s is claimed by %s until %s", e.TaskID, e.Holder, e.Until.UTC().Format(time.RFC3339))
}

// Is matches ErrClaimed.
func (e *ClaimedError) Is(target error) bool { return target == ErrClaimed }

// ErrorCode implements errs.Coder.
func (e *ClaimedError) ErrorCode() Code { return CodeClaimed }

// ConflictError lists the tasks changed both in the file and on the board
// since the last sync. Nothing of them was overwritten.
type ConflictError struct {
	Path      string
	Conflicts []Conflict
}

// Error implements error.
func (e *ConflictError) Error() string {
	ids := make([]string, len(e.Conflicts))
	for i, c := range e.Conflicts {
		ids[i] = c.TaskID
	}
	return fmt.Sprintf("%s changed both in %s and on the board since the last sync: make them agree in the file, or resolve keeping one side",
		strings.Join(ids, ", "), e.Path)
}

// Is matches ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// ErrorCode implements errs.Coder.
func (e *ConflictError) ErrorCode() Code { return CodeConflict }

// ErrorCode returns the code of a coded error (package errs), such as the
// board's, or "" for others (which are internal: I/O, database).
func ErrorCode(err error) Code {
	if c := errs.CodeOf(err); c != errs.Internal {
		return c
	}
	return ""
}

func invalidf(format string, args ...any) error {
	return &Error{Code: CodeInvalid, Message: fmt.Sprintf(format, args...)}
}

func notFound(num int) error {
	id := taskID(num)
	return &Error{Code: CodeNotFound, TaskID: id, Message: "no task " + id + " on the board"}
}
