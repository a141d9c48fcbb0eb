package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/warrenhq/warren/sessions/events"
)

// SessionWatchInput is the input of session_watch.
type SessionWatchInput struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"the session to watch; omitted: your default session (if it exists)"`
	After     int64  `json:"after,omitempty" jsonschema:"return the events after this cursor: 0 for the oldest kept, then the cursor of the previous result"`
	Tail      int    `json:"tail,omitempty" jsonschema:"instead of after: start with the newest this many events (a feed opening on the present)"`
	WaitMS    int    `json:"wait_ms,omitempty" jsonschema:"when nothing is newer than the cursor, wait up to this many milliseconds for new events (max 55000; default 0: return at once). With a progressToken, the events stream as progress notifications while the call waits (each message is JSON {\"events\":[...]}) and the call returns with all of them when wait_ms ends; without one it returns as soon as there are events"`
	Limit     int    `json:"limit,omitempty" jsonschema:"the most events to return (default 200, max 1000)"`
}

// WatchEvent is one entry of a session's activity log.
type WatchEvent struct {
	Seq        int64  `json:"seq" jsonschema:"the event's number in its session, increasing"`
	At         string `json:"at" jsonschema:"RFC 3339 time with milliseconds"`
	Kind       string `json:"kind" jsonschema:"call (a tool call started; summary: its arguments), output (a chunk of a command's output: stream and text) or result (a call ended: summary, is_error, duration_ms)"`
	CallID     string `json:"call_id" jsonschema:"the tool call the event belongs to"`
	Tool       string `json:"tool" jsonschema:"the tool called"`
	Client     string `json:"client" jsonschema:"the name the calling MCP client gave"`
	Console    bool   `json:"console,omitempty" jsonschema:"call and result: the call came from warren's web console (signed in through it), not from an agent's client"`
	Summary    string `json:"summary,omitempty" jsonschema:"call: the arguments, summarized; result: the outcome (secrets redacted)"`
	Stream     string `json:"stream,omitempty" jsonschema:"output: stdout or stderr"`
	Text       string `json:"text,omitempty" jsonschema:"output: the text, secrets redacted; untrusted, never HTML"`
	IsError    bool   `json:"is_error,omitempty" jsonschema:"result: the call failed, or the command exited non-zero"`
	DurationMS int64  `json:"duration_ms,omitempty" jsonschema:"result: how long the call took"`
}

// SessionWatchOutput is the output of session_watch.
type SessionWatchOutput struct {
	SessionID string       `json:"session_id" jsonschema:"the session watched"`
	Events    []WatchEvent `json:"events" jsonschema:"the events after the cursor, oldest first"`
	Cursor    int64        `json:"cursor" jsonschema:"pass it as after in the next call"`
	More      bool         `json:"more" jsonschema:"more events are waiting: call again at once"`
	Cut       bool         `json:"cut,omitempty" jsonschema:"the reply reached its size cap (256 KiB of events) before limit: the events after cursor were left for the next call, none is lost"`
}

func (o SessionWatchOutput) inSession() string { return o.SessionID }

const (
	maxWatchWait   = 55 * time.Second
	defaultWatchN  = 200
	maxWatchEvents = 1000
	// maxWatchBytes caps the events of one reply, as JSON: the result
	// carries them twice (structured and as text), so a reply stays under
	// 512 KiB. Events are up to 16 KB each, so a thousand were 16 MB per
	// reply, and 40 long polls took the server from 76 to 350 MB.
	maxWatchBytes = 256 << 10
	// maxWatchesPerUser bounds one user's session_watch calls in flight:
	// each holds a reply being gathered, and a long poll its request.
	// The console runs one per open Activity page.
	maxWatchesPerUser = 8
)

func sessionWatch(d *deps) Tool {
	t := mcp.NewTool("session_watch",
		mcp.WithDescription("Watch a session's activity: every tool call made in it by any client (arguments summarized), "+
			"the output of its commands as it streams, and each outcome, with secrets redacted. Returns the events "+
			"after a cursor; with wait_ms it waits for new ones (a long poll), streaming them as progress "+
			"notifications when the request carries a progressToken. Each session keeps its newest 2000 events. "+
			"A reply holds at most 256 KiB of events (cut true, more true: call again from its cursor); "+
			"a user may have 8 calls of it running at once."),
		mcp.WithInputSchema[SessionWatchInput](),
		mcp.WithOutputSchema[SessionWatchOutput](),
		annotations("Watch a session's activity", true, false, true, false),
	)
	h := typedHandler(func(ctx context.Context, req mcp.CallToolRequest, in SessionWatchInput) (result[SessionWatchOutput], error) {
		user, err := callerOf(ctx)
		if err != nil {
			return result[SessionWatchOutput]{}, err
		}
		if in.After < 0 || in.Tail < 0 || in.WaitMS < 0 || in.Limit < 0 {
			return result[SessionWatchOutput]{}, errorf("after, tail, wait_ms and limit must not be negative")
		}
		if in.WaitMS > int(maxWatchWait.Milliseconds()) {
			return result[SessionWatchOutput]{}, errorf("wait_ms %d is over the maximum of %d: wait less and call again", in.WaitMS, maxWatchWait.Milliseconds())
		}
		limit := in.Limit
		if limit == 0 {
			limit = defaultWatchN
		}
		limit = min(limit, maxWatchEvents)
		s, err := d.sessions.Lookup(ctx, user, in.SessionID)
		if err != nil {
			return result[SessionWatchOutput]{}, err
		}
		release, err := d.watchers.acquire(user)
		if err != nil {
			return result[SessionWatchOutput]{}, err
		}
		defer release()
		cursor := in.After
		if in.Tail > 0 {
			cursor = max(d.events.Last(ctx, s.ID)-int64(in.Tail), 0)
		}
		out, err := d.watch(ctx, req, s.ID, cursor, limit, time.Duration(in.WaitMS)*time.Millisecond)
		if err != nil {
			return result[SessionWatchOutput]{}, err
		}
		return result[SessionWatchOutput]{Out: out, Text: renderWatch(out)}, nil
	})
	return Tool{Toolset: "sessions", Tool: t, Handler: h}
}

// watch collects the events after cursor, waiting up to wait for the first
// ones. With a progress token it streams each new batch as a progress
// notification and goes on until wait ends or limit events came.
func (d *deps) watch(ctx context.Context, req mcp.CallToolRequest, session string, cursor int64, limit int, wait time.Duration) (SessionWatchOutput, error) {
	out := SessionWatchOutput{SessionID: session, Events: []WatchEvent{}, Cursor: cursor}
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	size := 0 // of out.Events, as JSON
	for first := true; ; first = false {
		changed := d.events.Changed(session) // before reading: nothing falls between
		// The store's budget counts texts, so that it reads no more than
		// about a reply; the reply's, below, counts exact JSON.
		evs, more, err := d.events.Page(ctx, session, out.Cursor, limit-len(out.Events), max(maxWatchBytes-size, 1))
		if err != nil {
			return out, err
		}
		var batch []WatchEvent
		for _, e := range evs {
			w := watchEvent(e)
			n := jsonSize(w)
			if size+n > maxWatchBytes && len(out.Events)+len(batch) > 0 {
				more = true // this one and those after it wait for the next call
				break
			}
			size += n
			batch = append(batch, w)
		}
		if len(batch) > 0 {
			out.Events = append(out.Events, batch...)
			out.Cursor = batch[len(batch)-1].Seq
		}
		// Cut by size, not by limit: say so, so that a client knows why.
		out.More, out.Cut = more, more && len(out.Events) < limit
		if len(batch) > 0 || more {
			// Events there at once (a client catching up), a full result,
			// or a client that does not read progress: return now.
			if first || more || len(out.Events) >= limit || token == nil {
				return out, nil
			}
			d.streamEvents(ctx, token, batch, out.Cursor)
		}
		if wait == 0 {
			return out, nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return out, nil
		case <-ctx.Done():
			return out, nil
		}
	}
}

// streamEvents sends a batch of events as one progress notification whose
// progress is the cursor after it.
func (d *deps) streamEvents(ctx context.Context, token mcp.ProgressToken, batch []WatchEvent, cursor int64) {
	b, err := json.Marshal(map[string]any{"events": batch})
	if err != nil {
		return
	}
	d.notes.send(ctx, token, cursor, string(b))
}

// jsonSize is the size of w in a reply, as JSON.
func jsonSize(w WatchEvent) int {
	b, err := json.Marshal(w)
	if err != nil {
		return maxWatchBytes // never happens; counts as full
	}
	return len(b) + 1 // and its comma
}

func watchEvent(e events.Event) WatchEvent {
	return WatchEvent{Seq: e.Seq, At: e.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Kind: e.Kind, CallID: e.Call,
		Tool: e.Tool, Client: e.Client, Console: e.Console, Summary: e.Summary, Stream: e.Stream, Text: e.Text, IsError: e.IsError,
		DurationMS: e.DurationMS}
}

// renderWatch is the text a model reads: one line per call and result,
// output as it came.
func renderWatch(o SessionWatchOutput) string {
	var b strings.Builder
	for _, e := range o.Events {
		switch e.Kind {
		case events.KindCall:
			client := e.Client
			if e.Console {
				client += ", the web console"
			}
			fmt.Fprintf(&b, "[%d] %s %s (%s): %s\n", e.Seq, e.At, e.Tool, client, e.Summary)
		case events.KindResult:
			fmt.Fprintf(&b, "[%d] %s → %s\n", e.Seq, e.Tool, e.Summary)
		default:
			b.WriteString(e.Text)
			if !strings.HasSuffix(e.Text, "\n") {
				b.WriteString("\n")
			}
		}
	}
	switch {
	case o.Cut:
		fmt.Fprintf(&b, "[cursor %d; cut at the reply's cap of %d KiB of events: call again with after %d for the rest]", o.Cursor, maxWatchBytes>>10, o.Cursor)
	case o.More:
		fmt.Fprintf(&b, "[cursor %d; more events are waiting]", o.Cursor)
	default:
		fmt.Fprintf(&b, "[cursor %d]", o.Cursor)
	}
	return b.String()
}
