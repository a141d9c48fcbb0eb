package proto

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// InitialCredit is how many bytes the runner may send on a stream before
// the server grants more (Credit frames as it consumes them).
const InitialCredit = 4 << 20

// MaxMessage bounds an error's message as the server keeps it.
const MaxMessage = 4 << 10

// HelloMsg is the runner's first frame: which protocol it speaks and what
// it can do.
type HelloMsg struct {
	Protocol int      `json:"protocol"`
	Ops      []string `json:"ops"`
}

// Request opens a stream: the operation and its arguments (each
// operation's own struct, in JSON).
type Request struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Reply ends a stream: the operation's result (its own struct, in JSON) or
// an error.
type Reply struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Error is a refusal or failure the runner reports. Code is one of
// warren's error codes (invalid, not_found, conflict, busy, limit,
// unavailable, internal); the server checks it and bounds Message before
// it shows or keeps either.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Errorf makes an Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// The codes an Error may carry: warren's error vocabulary (sessions/errs).
const (
	CodeInvalid     = "invalid"
	CodeNotFound    = "not_found"
	CodeConflict    = "conflict"
	CodeBusy        = "busy"
	CodeLimit       = "limit"
	CodeUnavailable = "unavailable"
	CodeInternal    = "internal"
)

// KnownCode reports whether c is one of the codes above.
func KnownCode(c string) bool {
	switch c {
	case CodeInvalid, CodeNotFound, CodeConflict, CodeBusy, CodeLimit, CodeUnavailable, CodeInternal:
		return true
	}
	return false
}

// Cut bounds s to max bytes of valid UTF-8, for text a peer sent that is
// only shown (an error's message).
func Cut(s string, max int) string {
	if len(s) > max {
		s = s[:max]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // replaces invalid bytes
	}
	return s
}

// The operations every runner serves. Each operation's arguments and
// result are the structs named after it; more operations are declared in
// the files of this package named after what they do.
const (
	// OpPing answers with an empty result: the runner is alive and
	// serving (PingArgs, PingResult).
	OpPing = "ping"
)

// PingArgs are the arguments of OpPing.
type PingArgs struct{}

// PingResult is the result of OpPing: the runner's pid in the jail.
type PingResult struct {
	PID int `json:"pid"`
}
