// Package events keeps the activity log of each workspace session: every
// tool call made in it by any client, with its arguments summarized, the
// output of its commands as it streams, and its outcome. The log is what
// the session_watch tool serves, so that the web console (or any MCP
// client) can watch an agent that some other client drives.
//
// Appending never waits for the database: events get their sequence number
// at once, are visible to readers at once, and are written in batches in
// the background. Every text is redacted (metering.Redact) before it is
// kept, and each session keeps only its newest MaxEvents events.
package events

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/warrenhq/warren/sessions/bound"
)

// Kinds of events.
const (
	// KindCall: a tool call started; Summary holds its arguments, summarized.
	KindCall = "call"
	// KindOutput: a chunk of a command's output (Stream, Text).
	KindOutput = "output"
	// KindResult: a tool call ended; Summary holds its outcome, IsError
	// says whether it failed.
	KindResult = "result"
)

// Event is one entry of a session's activity log.
type Event struct {
	Session    string
	Seq        int64 // per session, from 1; the cursor of session_watch
	At         time.Time
	Kind       string
	Call       string // the tool call this event belongs to
	Tool       string
	Client     string // the MCP client's name
	Console    bool   // the call came from warren's web console (its sign-in), not an agent
	Summary    string
	Stream     string // "stdout" or "stderr" for output
	Text       string
	IsError    bool
	DurationMS int64
}

// Caps on what one event keeps; longer texts are cut with a note.
const (
	MaxSummary = 1 << 10
	MaxText    = 16 << 10
)

// DefaultMaxEvents is how many events a session keeps when
// Options.MaxEvents is zero.
const DefaultMaxEvents = 2000

// Options configure a Log.
type Options struct {
	// MaxEvents bounds the events kept per session; older ones are
	// deleted. 0 means DefaultMaxEvents.
	MaxEvents int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives write failures.
	Log zerolog.Logger
}

// Log is the activity log of every session, stored in SQLite.
type Log struct {
	db  *sql.DB
	max int
	now func() time.Time
	log zerolog.Logger

	// mu protects the fields below.
	mu       sync.Mutex
	next     map[string]int64         // next seq per session, loaded on first use
	lastAt   map[string]time.Time     // time of each session's newest event since the start
	pending  []Event                  // appended, not yet handed to the writer
	inflight []Event                  // being written; still read from memory
	signals  map[string]chan struct{} // closed when a session gets an event
	gone     map[string]bool          // sessions forgotten (forget.go)
	closed   bool

	// writeMu serialises writes (the writer's, and Append's after Close)
	// and protects trimmed: per session, the seq up to which old events
	// were deleted.
	writeMu sync.Mutex
	trimmed map[string]int64

	wake   chan struct{}
	done   chan struct{}
	exited chan struct{}
}

// batchDelay is how long the writer gathers events before a write. Readers
// see events in memory at once, so it adds nothing to a watcher's
// latency; a longer delay means fewer write transactions competing for
// the database's lock with the sessions' and the meter's. A crash loses
// at most this much of the log.
const batchDelay = 200 * time.Millisecond

// Open applies the migrations and starts the background writer.
func Open(ctx context.Context, db *sql.DB, opts Options) (*Log, error) {
	if err := Migrate(ctx, db); err != nil {
		return nil, err
	}
	l := &Log{db: db, max: opts.MaxEvents, now: opts.Now, log: opts.Log,
		next: map[string]int64{}, lastAt: map[string]time.Time{}, trimmed: map[string]int64{}, signals: map[string]chan struct{}{}, gone: map[string]bool{},
		wake: make(chan struct{}, 1), done: make(chan struct{}), exited: make(chan struct{})}
	if l.max <= 0 {
		l.max = DefaultMaxEvents
	}
	if l.now == nil {
		l.now = time.Now
	}
	go l.run()
	return l, nil
}

// Append redacts e, gives it the session's next sequence number and the
// time, and queues it; it returns the event as kept. It reads the database
// only for a session's first event since the start.
func (l *Log) Append(e Event) Event {
	e.Summary = cut(redact(e.Summary), MaxSummary)
	e.Text = cut(redact(e.Text), MaxText)
	// The client named itself, and each event keeps its name.
	e.Client, e.Tool = bound.String(e.Client, bound.Name), bound.String(e.Tool, bound.Name)
	if e.At.IsZero() {
		e.At = l.now()
	}
	l.mu.Lock()
	if l.isGone(e.Session) {
		l.mu.Unlock()
		return e // its log was removed with it: nothing is kept
	}
	if _, ok := l.next[e.Session]; !ok {
		// The session's first event since the start: read where its log
		// stands, outside the lock that every appender takes.
		l.mu.Unlock()
		var last int64
		// Best effort: a failed read restarts at 1, and the writer's
		// upsert keeps the newer event.
		_ = l.db.QueryRow(`SELECT COALESCE(MAX(seq), 0) FROM session_events WHERE session_id = ?`, e.Session).Scan(&last)
		l.mu.Lock()
		if _, ok := l.next[e.Session]; !ok {
			l.next[e.Session] = last + 1
		}
	}
	defer l.mu.Unlock()
	e.Seq = l.next[e.Session]
	l.next[e.Session]++
	l.lastAt[e.Session] = e.At
	if !l.closed {
		l.pending = append(l.pending, e)
		select {
		case l.wake <- struct{}{}:
		default:
		}
	} else if err := l.write([]Event{e}); err != nil {
		l.log.Warn().Err(err).Str("session", e.Session).Msg("session event lost at shutdown")
	}
	if ch, ok := l.signals[e.Session]; ok {
		close(ch)
		delete(l.signals, e.Session)
	}
	return e
}

// Changed returns a channel closed when session gets its next event. Get
// it before reading with After so that no event falls between the two.
func (l *Log) Changed(session string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch, ok := l.signals[session]
	if !ok {
		ch = make(chan struct{})
		l.signals[session] = ch
	}
	return ch
}

// After returns up to limit events of session whose seq is after cursor,
// oldest first, and whether more follow.
func (l *Log) After(ctx context.Context, session string, cursor int64, limit int) ([]Event, bool, error) {
	return l.Page(ctx, session, cursor, limit, 0)
}

// Size is what an event weighs against a byte budget: its texts and a
// fixed allowance for the other fields.
func Size(e Event) int {
	return len(e.Summary) + len(e.Text) + len(e.Tool) + len(e.Client) + len(e.Call) + 64
}

// Page is After with a byte budget as well: it stops before the event that
// would take the events' Size past maxBytes (0: no budget), though it
// always returns at least one event when one follows cursor. Rows are read
// one at a time, so a reader never holds more than the budget of them:
// a session keeps 2,000 events of up to 16 KB, and a thousand read whole
// for each of a few dozen readers was hundreds of MB.
func (l *Log) Page(ctx context.Context, session string, cursor int64, limit, maxBytes int) ([]Event, bool, error) {
	if limit <= 0 {
		limit = 100
	}
	fits := func(total, next, n int) bool { return maxBytes <= 0 || n == 0 || total+next <= maxBytes }
	// Events in memory first: an event leaves memory only once it is
	// committed, so anything missing from this copy is in the table.
	l.mu.Lock()
	var mem []Event
	for _, list := range [][]Event{l.inflight, l.pending} {
		for _, e := range list {
			if e.Session == session && e.Seq > cursor {
				mem = append(mem, e)
			}
		}
	}
	l.mu.Unlock()
	rows, err := l.db.QueryContext(ctx, `SELECT seq, at, kind, call_id, tool, client, console, summary, stream, text, is_error, duration_ms
		FROM session_events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`, session, cursor, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("read session events: %w", err)
	}
	defer rows.Close()
	var out []Event
	total, full := 0, false
	for rows.Next() {
		e := Event{Session: session}
		var at int64
		if err := rows.Scan(&e.Seq, &at, &e.Kind, &e.Call, &e.Tool, &e.Client, &e.Console, &e.Summary, &e.Stream, &e.Text, &e.IsError, &e.DurationMS); err != nil {
			return nil, false, fmt.Errorf("read session events: %w", err)
		}
		e.At = time.UnixMilli(at).UTC()
		if !fits(total, Size(e), len(out)) {
			// One event past the budget is read, so that more is known.
			out = append(out, e)
			full = true
			break
		}
		total += Size(e)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("read session events: %w", err)
	}
	out = merge(out, mem)
	// The budget again, over the merged list: events in memory may come
	// before those read from the table.
	total = 0
	for i, e := range out {
		if i == limit || !fits(total, Size(e), i) {
			return out[:i], true, nil
		}
		total += Size(e)
	}
	return out, full, nil
}

// merge joins two lists ordered by seq, dropping duplicates.
func merge(a, b []Event) []Event {
	out := make([]Event, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b) || i < len(a) && a[i].Seq < b[j].Seq:
			out = append(out, a[i])
			i++
		case i >= len(a) || b[j].Seq < a[i].Seq:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	return out
}

// Close writes what is queued and stops the writer; later events are
// written one by one.
func (l *Log) Close() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.done)
	}
	l.mu.Unlock()
	<-l.exited
}

func (l *Log) run() {
	defer close(l.exited)
	for {
		select {
		case <-l.wake:
		case <-l.done:
			l.flush()
			return
		}
		t := time.NewTimer(batchDelay)
		select {
		case <-t.C:
		case <-l.done:
		}
		t.Stop()
		l.flush()
	}
}

// flush writes the pending events. A batch the database refuses is tried
// three times and then given up with a warning: the log is for watching,
// not billing, and must not grow without bound while the database is stuck.
func (l *Log) flush() {
	l.mu.Lock()
	l.inflight, l.pending = l.pending, nil
	batch := l.inflight
	l.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	var err error
	for attempt := range 3 {
		if err = l.write(batch); err == nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
	}
	if err != nil {
		l.log.Warn().Err(err).Int("events", len(batch)).Msg("session events lost: the database refused them")
	}
	l.mu.Lock()
	l.inflight = nil
	l.mu.Unlock()
}

// write inserts a batch in one transaction and trims each session it
// touched to about the newest max events: a session is trimmed once its
// newest event is max/8 past the last trim, so that a busy session does
// not pay a DELETE with every batch.
func (l *Log) write(batch []Event) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	ctx := context.Background()
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("write session events: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after commit
	insert, err := tx.PrepareContext(ctx, `INSERT INTO session_events
		(session_id, seq, at, kind, call_id, tool, client, console, summary, stream, text, is_error, duration_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (session_id, seq) DO UPDATE SET at = excluded.at, kind = excluded.kind, call_id = excluded.call_id,
			tool = excluded.tool, client = excluded.client, console = excluded.console, summary = excluded.summary, stream = excluded.stream,
			text = excluded.text, is_error = excluded.is_error, duration_ms = excluded.duration_ms`)
	if err != nil {
		return fmt.Errorf("write session events: %w", err)
	}
	defer insert.Close()
	last := map[string]int64{}
	l.mu.Lock()
	live := batch[:0:0]
	for _, e := range batch {
		if !l.isGone(e.Session) {
			live = append(live, e)
		}
	}
	l.mu.Unlock()
	for _, e := range live {
		if _, err := insert.ExecContext(ctx, e.Session, e.Seq, e.At.UnixMilli(), e.Kind, e.Call, e.Tool, e.Client, e.Console,
			e.Summary, e.Stream, e.Text, e.IsError, e.DurationMS); err != nil {
			return fmt.Errorf("write session events: %w", err)
		}
		last[e.Session] = max(last[e.Session], e.Seq)
	}
	var trimmed []string
	for s, seq := range last {
		if seq-int64(l.max) <= l.trimmed[s]+int64(l.max/8) {
			continue
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM session_events WHERE session_id = ? AND seq <= ?`,
			s, seq-int64(l.max)); err != nil {
			return fmt.Errorf("trim session events: %w", err)
		}
		trimmed = append(trimmed, s)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("write session events: %w", err)
	}
	for _, s := range trimmed {
		l.trimmed[s] = last[s] - int64(l.max)
	}
	return nil
}

// cut shortens s to at most n bytes on a rune boundary and says so.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const note = " … [cut]"
	k := n - len(note)
	for k > 0 && !utf8.RuneStart(s[k]) {
		k--
	}
	return s[:k] + note
}

// Last returns the seq of session's newest event, 0 when it has none.
func (l *Log) Last(ctx context.Context, session string) int64 {
	l.mu.Lock()
	next, ok := l.next[session]
	l.mu.Unlock()
	if ok {
		return next - 1
	}
	var last int64
	_ = l.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM session_events WHERE session_id = ?`, session).Scan(&last)
	return last
}

// LastAt returns the time of session's newest event, zero when it has
// none.
func (l *Log) LastAt(ctx context.Context, session string) time.Time {
	l.mu.Lock()
	at, ok := l.lastAt[session]
	l.mu.Unlock()
	if ok {
		return at
	}
	var ms sql.NullInt64
	_ = l.db.QueryRowContext(ctx, `SELECT MAX(at) FROM session_events WHERE session_id = ?`, session).Scan(&ms)
	if !ms.Valid {
		return time.Time{}
	}
	return time.UnixMilli(ms.Int64).UTC()
}
