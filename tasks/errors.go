package tasks

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Code classifies errors so that the MCP tools and the CLI can turn them
// into clear messages without matching strings.
type Code string

// The error codes.
const (
	CodeNotFound Code = "not_found" // unknown task id
	CodeInvalid  Code = "invalid"   // bad input: empty title, bad status, bad id, bad file
	CodeConflict Code = "conflict"  // the same task changed in the file and on the board
	CodeClaimed  Code = "claimed"   // another holder has the task, or the caller has no claim
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

// ErrorCode returns the code of a board error, or "" for other errors
// (which are internal: I/O, database).
func ErrorCode(err error) Code {
	var e *Error
	var c *ClaimedError
	var k *ConflictError
	switch {
	case errors.As(err, &c):
		return CodeClaimed
	case errors.As(err, &k):
		return CodeConflict
	case errors.As(err, &e):
		return e.Code
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
