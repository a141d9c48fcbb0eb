package mcp

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Log messages to clients (notifications/message, the MCP logging
// capability): what a client should know that is not the answer to its
// call, such as a shell that died and was restarted, or a usage threshold
// that stops commands. A client chooses the least severe level it wants with
// logging/setLevel; until it does, it gets warnings and worse.

// clientLogger names warren in the notifications it sends.
const clientLogger = "warren"

// defaultClientLevel is the level of a client that never set one.
const defaultClientLevel = mcp.LoggingLevelWarning

// notify sends the client of ctx's call a log message at level, if the
// client wants that level; fields add structured detail. It does nothing
// outside a call. Over HTTP the message goes out on the call's own stream,
// before its response; the server's own log gets it at debug level.
func (d *deps) notify(ctx context.Context, level mcp.LoggingLevel, message string, fields map[string]any) {
	if d.notes == nil || d.notes.srv == nil {
		return
	}
	data := map[string]any{"message": message}
	for k, v := range fields {
		data[k] = v
	}
	err := d.notes.srv.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(level, clientLogger, data))
	d.log.Debug().Err(err).Str("client_level", string(level)).Interface("data", data).Msg("notify client")
}

// notifyTools is tool middleware that tells the client about events a tool
// result reports but a model may not read: a restarted shell.
func (d *deps) notifyTools(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := next(ctx, req)
		if res != nil {
			if r, ok := res.StructuredContent.(ShellResult); ok && r.ShellRestarted {
				d.notify(ctx, mcp.LoggingLevelWarning, "the shell of session "+r.SessionID+
					" exited and was restarted in the same directory with the same exports; "+
					"its background processes and unexported variables are gone",
					map[string]any{"event": "shell_restarted", "session_id": r.SessionID})
			}
		}
		return res, err
	}
}

// setDefaultClientLevel is an OnRegisterSession hook: a new client gets
// warnings until it sets its own level (mcp-go's default is errors only).
func setDefaultClientLevel(_ context.Context, session server.ClientSession) {
	if l, ok := session.(server.SessionWithLogging); ok {
		l.SetLogLevel(defaultClientLevel)
	}
}
