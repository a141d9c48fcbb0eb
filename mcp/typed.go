package mcp

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// result is what a typed handler returns: the structured value and its
// readable text rendering.
type result[Out any] struct {
	Out  Out
	Text string
	// Extra is content after the text (read_file's image).
	Extra []mcp.Content
}

// typedHandler adapts a typed handler to mcp-go. Arguments are bound into
// In (the schema was already validated by the server); a returned error
// becomes a tool result with isError true, because a model can act on
// "file not found" but not on a JSON-RPC internal error.
func typedHandler[In, Out any](fn func(ctx context.Context, req mcp.CallToolRequest, in In) (result[Out], error)) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in In
		if err := bindArguments(req, &in); err != nil {
			return mcp.NewToolResultError("invalid arguments: " + err.Error() + ": check them against the tool's input schema"), nil
		}
		res, err := fn(ctx, req, in)
		if err != nil {
			msg := toolMessage(err)
			if strings.TrimSpace(msg) == "" { // no error is ever empty
				msg = "the tool failed and its error had no message (a bug in warren: please report it)"
			}
			return mcp.NewToolResultError(msg), nil
		}
		r := mcp.NewToolResultStructured(res.Out, res.Text)
		r.Content = append(r.Content, res.Extra...)
		return r, nil
	}
}

// text converts raw command output to a string JSON can carry: invalid
// UTF-8 becomes U+FFFD; NUL survives as \u0000.
func text(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
