package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions"
)

// result is what a typed handler returns: the structured value and its
// readable text rendering.
type result[Out any] struct {
	Out  Out
	Text string
}

// typedHandler adapts a typed handler to mcp-go. Arguments are bound into
// In (the schema was already validated by the server); a returned error
// becomes a tool result with isError true, because a model can act on
// "file not found" but not on a JSON-RPC internal error.
func typedHandler[In, Out any](fn func(ctx context.Context, req mcp.CallToolRequest, in In) (result[Out], error)) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in In
		if err := req.BindArguments(&in); err != nil {
			return mcp.NewToolResultError("invalid arguments: " + err.Error() + ": check them against the tool's input schema"), nil
		}
		res, err := fn(ctx, req, in)
		if err != nil {
			return mcp.NewToolResultError(toolMessage(err)), nil
		}
		return mcp.NewToolResultStructured(res.Out, res.Text), nil
	}
}

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

// toolMessage translates domain errors into messages that say what to do.
func toolMessage(err error) string {
	var ue *userError
	switch {
	case errors.As(err, &ue):
		return ue.msg
	case errors.Is(err, sessions.ErrNotFound):
		return "session not found: omit session_id to use your default session, or pass the id a previous result returned"
	case errors.Is(err, sandbox.ErrBusy):
		return "the session's shell is busy running another command: wait for it with shell_wait, stop it with shell_kill, or use another session"
	case errors.Is(err, sandbox.ErrEmptyCommand):
		return "command is empty: pass a shell command such as 'ls -la'"
	case errors.Is(err, sandbox.ErrNULInCommand):
		return "command contains a NUL byte, which no shell can run: remove it"
	case errors.Is(err, sandbox.ErrClosed):
		return "the session's shell was closed because the server is shutting down: retry after it restarts"
	case errors.Is(err, context.Canceled):
		return "the call was cancelled"
	}
	return err.Error()
}

// text converts raw command output to a string JSON can carry: invalid
// UTF-8 becomes U+FFFD; NUL survives as \u0000.
func text(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
