package mcp

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/bound"
	"github.com/warrenhq/warren/sessions/events"
)

// Tools whose calls are not about one session: they are not in any
// session's activity log. session_watch is left out too, or every watcher
// would fill the log it watches.
var sessionless = []string{"session_watch", "session_list", "task_list", "task_add", "usage_report"}

// activityCall is a tool call's entry in the activity log, as its handler
// sees it: the output of its command is filed under its id, and a call
// whose session was not known when it began (session_create, a first call
// that makes the default session) is announced as soon as it is.
type activityCall struct {
	log *events.Log

	// mu protects the fields below.
	mu        sync.Mutex
	event     events.Event // the call event, Session empty until known
	announced bool
}

// announce logs the call event in session, once.
func (c *activityCall) announce(session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.announced || session == "" {
		return
	}
	c.announced = true
	c.event.Session = session
	c.log.Append(c.event)
}

func (c *activityCall) session() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.event.Session
}

type activityKey struct{}

func activityOf(ctx context.Context) *activityCall {
	c, _ := ctx.Value(activityKey{}).(*activityCall)
	return c
}

// recordActivity is the one place where tool calls enter the sessions'
// activity log (session_watch): a call event with the arguments summarized
// before the handler runs, a result event with the outcome after it.
func (d *deps) recordActivity(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		user := UserFrom(ctx)
		name := req.Params.Name
		if user == "" || slices.Contains(sessionless, name) {
			return next(ctx, req)
		}
		start := time.Now()
		call := &activityCall{log: d.events, event: events.Event{Kind: events.KindCall, Call: newCallID(), Tool: name,
			Client: clientName(ctx), Console: FromConsole(ctx), Summary: summarizeArgs(name, req.GetArguments()), At: start}}
		if name != "session_create" {
			call.announce(d.activitySession(ctx, user, req))
		}
		res, err := next(context.WithValue(ctx, activityKey{}, call), req)
		session := call.session()
		if session == "" {
			if session = d.sessionOf(ctx, user, req, res); session == "" {
				return res, err
			}
			call.announce(session)
		}
		summary, failed := summarizeResult(res, err)
		d.events.Append(events.Event{Session: session, Kind: events.KindResult, Call: call.event.Call, Tool: name,
			Client: call.event.Client, Console: call.event.Console, Summary: summary, IsError: failed, DurationMS: time.Since(start).Milliseconds()})
		return res, err
	}
}

// activitySession names the session a call is about before it runs: its
// session_id if that is the caller's, the session of its job_id, or the
// caller's default session if it exists. It never creates a session.
func (d *deps) activitySession(ctx context.Context, user string, req mcp.CallToolRequest) string {
	args := req.GetArguments()
	if id, _ := args["job_id"].(string); id != "" {
		if j := d.sessions.Job(user, id); j != nil {
			return j.Session().ID
		}
	}
	id, _ := args["session_id"].(string)
	s, err := d.sessions.Lookup(ctx, user, id)
	if err != nil {
		return ""
	}
	return s.ID
}

// commandLog returns the recorder of a command's output for the activity
// log; nil without a log. The call is announced first, so that its output
// never comes before it.
func (d *deps) commandLog(ctx context.Context, session string) sessions.OutputLog {
	c := activityOf(ctx)
	if d.events == nil || c == nil {
		return nil
	}
	c.announce(session)
	return streamLog{d.events.Stream(session, c.event.Call, "shell_exec", c.event.Client)}
}

// streamLog records a command's output in the activity log.
type streamLog struct{ s *events.Stream }

func (l streamLog) Output(which sessions.Stream, chunk []byte) {
	l.s.Write(which == sessions.Stderr, chunk)
}
func (l streamLog) Close() { l.s.Close() }

func newCallID() string { return "c-" + randomHex() }

// randomHex is 12 hex digits from the runtime's per-thread ChaCha8 (seeded
// from the kernel): ids that must be unique, not secret, without a system
// call per id.
func randomHex() string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], mrand.Uint64()) //nolint:gosec // an id, not a secret
	return hex.EncodeToString(b[:6])
}

// bulky arguments are logged by size only: file contents are for the
// diff, not for the activity feed.
var bulky = []string{"content", "old_text", "new_text"}

// maxArg caps one argument's text in a summary.
const maxArg = 200

// summarizeArgs renders a call's arguments on one line: a command as is,
// other arguments as key=value, long texts cut and file contents by size.
// The log redacts secrets from it.
func summarizeArgs(tool string, args map[string]any) string {
	if cmd, ok := args["command"].(string); ok && tool == "shell_exec" {
		// Redacted, then cut to events.MaxSummary: keep enough that a
		// secret at the cut is cut again after redaction.
		return bound.String(cmd, 4*events.MaxSummary)
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		if k != "session_id" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		v := args[k]
		s, isString := v.(string)
		switch {
		case isString && slices.Contains(bulky, k):
			parts = append(parts, fmt.Sprintf("%s=(%d bytes)", k, len(s)))
		case isString:
			parts = append(parts, bound.String(k, maxArg)+"="+bound.String(s, maxArg))
		default:
			b, _ := json.Marshal(v)
			parts = append(parts, bound.String(k, maxArg)+"="+bound.String(string(b), maxArg))
		}
	}
	return strings.Join(parts, " ")
}

// summarizeResult renders a call's outcome on one line, and whether it
// failed.
func summarizeResult(res *mcp.CallToolResult, err error) (string, bool) {
	if err != nil {
		return err.Error(), true
	}
	if res == nil {
		return "", false
	}
	if r, ok := res.StructuredContent.(ShellResult); ok && !res.IsError {
		return shellOutcome(r), r.ExitCode != 0 && !r.Running
	}
	if r, ok := res.StructuredContent.(ReadFileOutput); ok && !res.IsError {
		// The contents are the workspace's, not the feed's.
		return fmt.Sprintf("read %s: %d lines, %d bytes", r.Path, r.TotalLines, r.TotalBytes), false
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text = tc.Text
			break
		}
	}
	line, _, _ := strings.Cut(text, "\n")
	return bound.String(line, 300), res.IsError
}

func shellOutcome(r ShellResult) string {
	var s string
	switch {
	case r.Running:
		return fmt.Sprintf("still running as job %s", r.JobID)
	case r.TimedOut:
		s = fmt.Sprintf("timed out, exit %d", r.ExitCode)
	case r.Interrupted:
		s = fmt.Sprintf("interrupted, exit %d", r.ExitCode)
	default:
		s = fmt.Sprintf("exit %d", r.ExitCode)
	}
	return fmt.Sprintf("%s in %d ms, cwd %s", s, r.DurationMS, r.Cwd)
}
