// Package errs is warren's one error vocabulary. A domain error carries a
// Code that a caller can switch on (the MCP layer picks a tool error text
// from it, the CLI an exit status, the agent and the console what to show)
// and a message a person can act on: what went wrong and what to do next.
//
// A package declares its sentinels with New and returns them wrapped
// (fmt.Errorf("step: %w", ErrX), or Wrap to give a sentinel's match a
// message of its own), or gives its own typed error (with fields a caller
// needs, such as a task's holder) an ErrorCode method; CodeOf finds the
// code anywhere in the chain. Match a particular condition with errors.Is
// on the package's sentinel, never with == or by comparing text.
//
// It lives under sessions only because the repository's top level is
// fixed; it imports nothing but the standard library, and every package
// may use it.
package errs

import (
	"errors"
)

// Code classifies an error for the boundaries that translate it.
type Code string

// The codes. Internal is what CodeOf says of an error that carries none:
// an I/O or database failure the caller cannot fix by changing its input.
const (
	Invalid     Code = "invalid"     // bad input: say what is wrong and what is accepted
	NotFound    Code = "not_found"   // no such thing (or not the caller's: ids do not leak)
	Conflict    Code = "conflict"    // the thing's state refuses the action (archived, edited on both sides)
	Busy        Code = "busy"        // someone else holds it now: wait, or pick another
	Limit       Code = "limit"       // a configured cap refuses it (quota, sessions per user)
	Unavailable Code = "unavailable" // the service cannot serve it now (shutting down): retry later
	Internal    Code = "internal"    // anything else
)

// Coder is implemented by errors that carry a Code: *Error and the typed
// errors of the domain packages.
type Coder interface {
	ErrorCode() Code
}

// Error is a coded error. Msg is the whole message; Err, when set, is what
// it wraps for errors.Is and errors.As (its text is in Msg only if the
// maker put it there).
type Error struct {
	Code Code
	Msg  string
	Err  error
}

// Error implements error.
func (e *Error) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode implements Coder.
func (e *Error) ErrorCode() Code { return e.Code }

// New returns a coded error with a fixed message: a package's sentinel,
// matched with errors.Is by identity and wrapped with %w by its callers.
func New(code Code, msg string) *Error { return &Error{Code: code, Msg: msg} }

// Wrap returns an error with code and msg as its whole message that still
// matches err (errors.Is, errors.As): a refusal with a message of its own
// that callers find by the sentinel err.
func Wrap(code Code, err error, msg string) error { return &Error{Code: code, Msg: msg, Err: err} }

// CodeOf returns the code of the first coded error in err's chain,
// Internal when there is none, "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var c Coder
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	return Internal
}
