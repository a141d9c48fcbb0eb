package mcp

import (
	"context"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Log messages to clients (notifications/message, the MCP logging
// capability): what a client should know that is not the answer to its
// call, such as a shell that died and was restarted, or a usage threshold
// that stops commands. A client chooses the least severe level it wants with
// logging/setLevel; until it does, it gets warnings and worse. On the
// 2026-07-28 revision a request names its level in _meta and gets nothing
// without one, unless its client set a level with logging/setLevel (which
// warren honours in every revision).

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
	var err error
	session := server.ClientSessionFromContext(ctx)
	info := server.RequestProtocolInfoFromContext(ctx)
	modern := info != nil && info.Modern
	switch {
	case session == nil || (modern && info.LogLevel != ""):
		// 2026-07-28: the request says which level it wants; mcp-go decides.
		err = afterFlush(ctx, func() error {
			return d.notes.srv.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(level, clientLogger, data))
		})
	case modern:
		// A 2026-07-28 request that names no level gets messages only if its
		// client asked with logging/setLevel (the Go SDK does; the revision
		// moved the level into each request): over stdio for the session,
		// over HTTP, where this revision has no sessions, for the user.
		if chosen, ok := d.clientLevels.chosen(session.SessionID(), UserFrom(ctx)); ok && level.ShouldSendTo(chosen) {
			err = afterFlush(ctx, func() error {
				return d.notes.srv.SendNotificationToClient(ctx, "notifications/message",
					map[string]any{"level": level, "logger": clientLogger, "data": data})
			})
		}
	case level.ShouldSendTo(d.clientLevels.of(session.SessionID())):
		// Earlier revisions: the level the client set, or warnings by
		// default. mcp-go's own default (errors only, reset when a stdio
		// client initializes) would hide every warning warren sends.
		err = d.notes.srv.SendNotificationToClient(ctx, "notifications/message",
			map[string]any{"level": level, "logger": clientLogger, "data": data})
	}
	d.logFor(ctx).Debug().Err(err).Str("client_level", string(level)).Interface("data", data).Msg("notify client")
}

// clientLevels remembers the level each client set with logging/setLevel.
type clientLevels struct{ m sync.Map }

// set is an AfterSetLevel hook.
func (c *clientLevels) set(ctx context.Context, _ any, req *mcp.SetLevelRequest, _ *mcp.EmptyResult) {
	if s := server.ClientSessionFromContext(ctx); s != nil {
		c.m.Store(s.SessionID(), req.Params.Level)
	}
}

// setUser keeps the level a user set on the sessionless 2026-07-28
// revision over HTTP (http_protocol.go). One entry per user.
func (c *clientLevels) setUser(user string, level mcp.LoggingLevel) {
	c.m.Store(userLevelKey(user), level)
}

// userLevelKey never collides with a session id.
func userLevelKey(user string) string { return "user\x00" + user }

// chosen returns the level a client set with logging/setLevel: its
// session's, or, without a session (HTTP on 2026-07-28), its user's.
func (c *clientLevels) chosen(session, user string) (mcp.LoggingLevel, bool) {
	key := session
	if key == "" {
		key = userLevelKey(user)
	}
	v, ok := c.m.Load(key)
	if !ok {
		return "", false
	}
	return v.(mcp.LoggingLevel), true
}

// of returns the level a client set, or defaultClientLevel.
func (c *clientLevels) of(session string) mcp.LoggingLevel {
	if v, ok := c.chosen(session, ""); ok && session != "" {
		return v
	}
	return defaultClientLevel
}

// forget is an OnUnregisterSession hook.
func (c *clientLevels) forget(_ context.Context, s server.ClientSession) { c.m.Delete(s.SessionID()) }

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
			if r, ok := res.StructuredContent.(ShellResult); ok && d.sessions != nil {
				if n := d.sessions.TakeQuotaNotice(r.SessionID); n != "" {
					d.notify(ctx, mcp.LoggingLevelWarning, n, map[string]any{"event": "disk_quota", "session_id": r.SessionID})
				}
			}
		}
		return res, err
	}
}
