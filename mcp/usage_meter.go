package mcp

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/bound"
)

// unknownClient is recorded for clients that did not say who they are.
const unknownClient = "unknown"

// meterTools is the one place where tool results are metered: it wraps
// every handler and records the size of the result it returns. Before a
// shell_exec, with an enforced threshold, the records of earlier calls are
// written, so that the session manager's usage check (Manager.Exec) sees
// the output of the previous command.
func (d *deps) meterTools(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		user := UserFrom(ctx)
		if d.usage.enforce && req.Params.Name == "shell_exec" && user != "" {
			d.usage.flush()
		}
		res, err := next(ctx, req)
		if err == nil && res != nil && user != "" {
			d.recordResult(ctx, user, req, res)
		}
		return res, err
	}
}

// execError tells the client of a command an enforced usage threshold
// refused, as a notification too; other errors pass.
func (d *deps) execError(ctx context.Context, err error) error {
	var blocked *sessions.UsageBlockedError
	if errors.As(err, &blocked) {
		d.notify(ctx, mcp.LoggingLevelWarning, "usage threshold reached: "+blocked.Reason+"; shell_exec is refused until it is raised or resets",
			map[string]any{"event": "usage_threshold", "session_id": blocked.Session})
	}
	return err
}

// recordResult queues a tool_output record of the result's size on the
// wire (its JSON encoding). The writer measures it, off the call's path:
// encoding a result once more only to count its bytes took a real share of
// a small call's latency.
func (d *deps) recordResult(ctx context.Context, user string, req mcp.CallToolRequest, res *mcp.CallToolResult) {
	d.usage.add(metering.Record{
		User: user, Session: d.sessionOf(ctx, user, req, res), Client: clientName(ctx),
		Kind: metering.KindToolOutput, Tool: req.Params.Name,
	}, res)
}

// resultSize is the size of res's JSON encoding, as the transport sends it.
// res encodes itself (MarshalJSON, compact and HTML-escaped as
// json.Marshal makes it); json.Marshal(res) would check and copy those
// bytes once more, a scan of the whole result, to the same length.
func resultSize(res *mcp.CallToolResult) int64 {
	b, err := res.MarshalJSON()
	if err != nil {
		return 0
	}
	return int64(len(b))
}

// heldEstimate guesses the bytes res keeps alive while it waits to be
// measured: its text, and structured content about as big.
func heldEstimate(res *mcp.CallToolResult) int {
	n := 256
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); ok {
			n += 2 * len(t.Text)
		}
	}
	return n
}

// inSession is implemented by outputs that name the session they ran in.
type inSession interface{ inSession() string }

func (r ShellResult) inSession() string       { return r.SessionID }
func (r UsageRecordOutput) inSession() string { return r.SessionID }
func (r TaskOutput) inSession() string {
	if r.Task.Claim != nil {
		return r.Task.Claim.SessionID
	}
	return ""
}

// sessionOf names the session a call worked in: the one its result names,
// else its session_id argument if that is the caller's, else the caller's
// default session if it exists. It returns "" when none can be found.
func (d *deps) sessionOf(ctx context.Context, user string, req mcp.CallToolRequest, res *mcp.CallToolResult) string {
	if res != nil {
		if s, ok := res.StructuredContent.(inSession); ok && s.inSession() != "" {
			return s.inSession()
		}
	}
	id, _ := req.GetArguments()["session_id"].(string)
	s, err := d.sessions.Lookup(ctx, user, id) // never create a session to bill it
	if err != nil {
		return ""
	}
	return s.ID
}

// clientName is the name the MCP client gave in initialize (or, with the
// stateless revision, in the request's _meta), cut to bound.Name bytes:
// the client chose it, and it is kept in every event and usage record.
func clientName(ctx context.Context) string {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.ClientInfo != nil && info.ClientInfo.Name != "" {
		return bound.String(info.ClientInfo.Name, bound.Name)
	}
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		if name := s.GetClientInfo().Name; name != "" {
			return bound.String(name, bound.Name)
		}
	}
	return unknownClient
}

// boundClientInfo cuts what a client says of itself in initialize before
// the session keeps it for its lifetime: its name, version and title to
// bound.Name bytes, its description and address to bound.Line; its icons
// are dropped (warren shows none).
func boundClientInfo(_ context.Context, _ any, req *mcp.InitializeRequest) {
	ci := &req.Params.ClientInfo
	ci.Name, ci.Version, ci.Title = bound.String(ci.Name, bound.Name), bound.String(ci.Version, bound.Name), bound.String(ci.Title, bound.Name)
	ci.Description, ci.WebsiteURL = bound.String(ci.Description, bound.Line), bound.String(ci.WebsiteURL, bound.Line)
	ci.Icons = nil
}

// claimOf is the task a session holds a claim on, or "".
func (d *deps) claimOf(ctx context.Context, session string) string {
	if d.tasks == nil || session == "" {
		return ""
	}
	t, ok, err := d.tasks.ClaimOf(ctx, session)
	if err != nil {
		d.logFor(ctx).Warn().Err(err).Str("session", session).Msg("find the task of a usage record")
	}
	if !ok {
		return ""
	}
	return t.ID
}

// maxQueued bounds the records waiting to be written; past it new ones
// are dropped (and counted in the log) rather than growing memory without
// bound while the database is stuck.
const maxQueued = 10000

// maxHeld bounds the memory of results waiting to be measured; past it a
// result is measured by its call, as it used to be.
const maxHeld = 8 << 20

// usageQueue writes tool_output records in the background, in batches, so
// that metering adds no database write to the latency of a tool call.
// Reports and enforcement call flush first to see every earlier call.
type usageQueue struct {
	meter *metering.Meter
	claim func(ctx context.Context, session string) string
	log   zerolog.Logger
	// enforce: some usage threshold stops shell_exec (Options.Enforce).
	enforce bool

	// mu protects the fields below; cond signals progress of done.
	mu      sync.Mutex
	cond    *sync.Cond
	pending []metering.Record
	// unsized holds, for each pending record, the result the writer
	// measures for its Bytes (nil: measured already); held estimates the
	// memory they keep alive, bounded by maxHeld.
	unsized []*mcp.CallToolResult
	held    int
	queued  uint64 // records accepted so far
	done    uint64 // records written (or failed) so far
	dropped uint64
	closed  bool

	wake    chan struct{} // a record was queued
	urgent  chan struct{} // someone waits in flush: write now
	closing chan struct{} // closed by close
	exited  chan struct{} // closed when the writer has written the last records
}

// batchDelay is how long the writer gathers records before a write: one
// transaction for many calls costs about what one for a single call does,
// and the database (SQLite in WebAssembly) would otherwise take a real
// share of the CPU under load. Crashing loses at most this much.
const batchDelay = 50 * time.Millisecond

func newUsageQueue(m *metering.Meter, claim func(context.Context, string) string, log zerolog.Logger) *usageQueue {
	q := &usageQueue{meter: m, claim: claim, log: log, wake: make(chan struct{}, 1), urgent: make(chan struct{}, 1),
		closing: make(chan struct{}), exited: make(chan struct{})}
	q.cond = sync.NewCond(&q.mu)
	go q.run()
	return q
}

// add queues r. res, when not nil, is measured for r.Bytes by the writer
// (or here, when too much waits already): it must not change after the
// call returned it, which no middleware does.
func (q *usageQueue) add(r metering.Record, res *mcp.CallToolResult) {
	if q == nil {
		return
	}
	q.mu.Lock()
	if q.closed {
		// A call that finished while the server shuts down: its result was
		// sent, so its record is written now rather than dropped.
		q.mu.Unlock()
		if res != nil {
			r.Bytes = resultSize(res)
		}
		q.write([]metering.Record{r})
		return
	}
	defer q.mu.Unlock()
	if len(q.pending) >= maxQueued {
		q.dropped++
		return
	}
	if res != nil {
		if est := heldEstimate(res); q.held+est <= maxHeld {
			q.held += est
		} else {
			r.Bytes, res = resultSize(res), nil
		}
	}
	q.pending = append(q.pending, r)
	q.unsized = append(q.unsized, res)
	q.queued++
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// flush waits until every record queued before the call is written.
func (q *usageQueue) flush() {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	target := q.queued
	if q.done >= target {
		return
	}
	select {
	case q.urgent <- struct{}{}:
	default:
	}
	for q.done < target {
		q.cond.Wait()
	}
}

// close writes what is queued and stops the writer.
func (q *usageQueue) close() {
	if q == nil {
		return
	}
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.closing)
	}
	q.mu.Unlock()
	<-q.exited
}

func (q *usageQueue) run() {
	defer close(q.exited)
	for {
		select {
		case <-q.wake:
		case <-q.closing:
			q.writePending(true)
			return
		}
		t := time.NewTimer(batchDelay)
		select {
		case <-t.C:
		case <-q.urgent:
		case <-q.closing:
		}
		t.Stop()
		q.writePending(false)
	}
}

// retryDelays are the waits between attempts at a batch the database
// refused (busy past its timeout, disk full): records are billing data and
// are not given up on while the server runs; at shutdown the last attempt
// ends the wait and what still fails is logged with its count.
var retryDelays = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second, 5 * time.Second}

// writePending writes the queued records, retrying a failed batch until it
// is written, the server shuts down (final: a few quick attempts), or new
// records are waiting to join it.
func (q *usageQueue) writePending(final bool) {
	q.mu.Lock()
	batch, unsized := q.pending, q.unsized
	q.pending, q.unsized, q.held = nil, nil, 0
	dropped := q.dropped
	q.dropped = 0
	q.mu.Unlock()
	for i, res := range unsized {
		if res != nil {
			batch[i].Bytes = resultSize(res)
		}
	}
	if dropped > 0 {
		q.log.Warn().Uint64("records", dropped).Msg("tool-output usage records dropped: the usage store is not keeping up")
	}
	if len(batch) == 0 {
		return
	}
	for attempt := 0; ; attempt++ {
		err := q.record(batch)
		if err == nil {
			break
		}
		if final && attempt >= 2 || attempt >= len(retryDelays) && q.isClosing() {
			q.log.Error().Err(err).Int("records", len(batch)).Msg("tool-output usage records lost: the database refused them")
			break
		}
		d := retryDelays[min(attempt, len(retryDelays)-1)]
		q.log.Warn().Err(err).Int("records", len(batch)).Dur("retry_in", d).Msg("record tool output")
		select {
		case <-time.After(d):
		case <-q.closing:
			final = true
		}
	}
	q.mu.Lock()
	q.done += uint64(len(batch))
	q.cond.Broadcast()
	q.mu.Unlock()
}

func (q *usageQueue) isClosing() bool {
	select {
	case <-q.closing:
		return true
	default:
		return false
	}
}

// write records a batch at once, for calls that end after close.
func (q *usageQueue) write(batch []metering.Record) {
	if err := q.record(batch); err != nil {
		q.log.Error().Err(err).Int("records", len(batch)).Msg("tool-output usage records lost at shutdown")
	}
}

// record attributes each record to the task its session holds when it is
// written (one claim lookup per session of the batch) and writes them in
// one transaction.
func (q *usageQueue) record(batch []metering.Record) error {
	ctx := context.Background()
	claims := map[string]string{}
	for i := range batch {
		s := batch[i].Session
		if _, ok := claims[s]; !ok {
			claims[s] = q.claim(ctx, s)
		}
		batch[i].Task = claims[s]
	}
	_, err := q.meter.RecordBatch(ctx, batch)
	return err
}
