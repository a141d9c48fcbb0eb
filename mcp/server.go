package mcp

import (
	"context"
	"io"
	"log"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/bound"
	"github.com/warrenhq/warren/sessions/events"
	"github.com/warrenhq/warren/sessions/gitpush"
	"github.com/warrenhq/warren/tasks"
)

// Options configure a Server.
type Options struct {
	// Sessions resolves (user, session id) to a workspace and its shell.
	Sessions *sessions.Manager
	// Tasks is the task board of the tasks toolset; nil: not served.
	Tasks *tasks.Board
	// Meter records the size of every tool result, enforces usage
	// thresholds on shell_exec and serves the usage toolset; nil: none of it.
	Meter *metering.Meter
	// Enforce says that some usage threshold is enforced: shell_exec then
	// checks Meter.Enforced, after the records of earlier calls are written
	// so that a crossing stops the very next command. Without it no
	// command waits for the usage store.
	Enforce bool
	// Events is the sessions' activity log: every tool call is recorded
	// in it and session_watch serves it; nil: neither.
	Events *events.Log
	// Toolsets names the toolsets to serve; empty means all.
	Toolsets []string
	// Log receives the server's logs (stderr: stdout belongs to JSON-RPC).
	Log zerolog.Logger
	// Version is reported to clients.
	Version string
	// ShellYield is how long shell_exec and shell_wait wait for a command
	// before returning it as a running job; 0 means DefaultYield.
	ShellYield time.Duration
	// Agent runs agent_run; nil: the agent toolset is not served.
	Agent AgentRunner
	// Tracing turns on OpenTelemetry spans per request (tracing.go); off,
	// nothing is traced and nothing is added to a call.
	Tracing bool
	// Git clones with users' identities and pushes sessions (identity_list,
	// session_push, session_create's identity); nil: none of it.
	Git *gitpush.Service
}

// Server is warren's MCP server, ready to be served over one transport.
type Server struct {
	mcp   *server.MCPServer
	deps  *deps
	tools []Tool

	// Set by HTTPHandler.
	events *eventStore    // progress and responses kept for resumption
	owners *sessionOwners // who opened each MCP session
}

// New builds the server with the selected toolsets.
func New(opts Options) (*Server, error) {
	d := &deps{sessions: opts.Sessions, tasks: opts.Tasks, meter: opts.Meter, events: opts.Events, shellYield: opts.ShellYield, notes: newNotifier(), log: opts.Log, agent: opts.Agent, git: opts.Git}
	tools, err := selectTools(servedTools(allTools(d), d), opts.Toolsets)
	if err != nil {
		return nil, err
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	hooks := &server.Hooks{}
	hooks.AddAfterSetLevel(d.clientLevels.set)
	hooks.AddOnUnregisterSession(d.clientLevels.forget)
	hooks.AddBeforeInitialize(boundClientInfo)
	hooks.AddAfterInitialize(d.shared.recordClient) // http_sessions_client.go
	hooks.AddBeforeAny(d.shared.restoreClient)
	s := server.NewMCPServer("warren", version,
		server.WithElicitation(), // agent_run asks approvals
		server.WithToolCapabilities(false),
		server.WithLogging(), // notify.go
		server.WithHooks(hooks),
		server.WithRecovery(),
		// Arguments are validated first, as mcp-go's own input validation
		// would, at a fraction of its cost (validation.go).
		server.WithToolHandlerMiddleware(newArgumentErrors(tools).validate),
		server.WithInstructions("warren gives you a persistent, jailed /bin/sh and file tools in a workspace "+
			"mounted at /workspace. Omit session_id to use your default session."),
	)
	observe(d, s, opts) // metrics.go: first, to time and trace the whole call
	if d.events != nil {
		s.Use(d.recordActivity) // calls the meter refuses are logged too
	}
	if d.meter != nil {
		d.usage = newUsageQueue(d.meter, d.claimOf, d.log)
		d.usage.enforce = opts.Enforce
		s.Use(d.meterTools)
	}
	s.Use(d.notifyTools)
	for _, t := range tools {
		s.AddTool(t.Tool, t.Handler)
	}
	d.notes.srv = s
	d.srv = s
	return &Server{mcp: s, deps: d, tools: tools}, nil
}

// Tools returns the tools this server serves.
func (s *Server) Tools() []Tool { return s.tools }

// MCPServer exposes the underlying mcp-go server (in-process clients).
func (s *Server) MCPServer() *server.MCPServer { return s.mcp }

// ServeStdio serves one client on in/out as user until in closes or ctx
// ends. Nothing but JSON-RPC is written to out.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer, user string) error {
	s.deps.notes.track = true
	std := server.NewStdioServer(s.mcp)
	std.SetErrorLogger(log.New(logWriter{s.deps.log}, "", 0))
	w := &countingWriter{w: out, n: s.deps.notes}
	return listenStdio(ctx, std, s.mcp, in, w, func(ctx context.Context) context.Context { return WithUser(ctx, user) })
}

// Close interrupts running commands. The caller closes the session manager.
func (s *Server) Close() {
	if s.deps.sessions != nil { // a server of other tools only (tests, benchmarks)
		s.deps.sessions.StopCommands()
	}
	s.deps.usage.close() // write the last tool-output records
}

// logWriter adapts zerolog for mcp-go's *log.Logger.
type logWriter struct{ l zerolog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.l.Warn().Str("from", "mcp-go").Msg(bound.String(strings.TrimSpace(string(p)), bound.Line))
	return len(p), nil
}
