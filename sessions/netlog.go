package sessions

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/warrenhq/warren/sandbox/netproxy"
	"github.com/warrenhq/warren/sessions/bound"
)

// NetLog stores the egress proxy's decisions in the database, in batches:
// an npm install makes hundreds, and none of them may wait for a write.
// The newest netLogKeep decisions of each session are kept.
type NetLog struct {
	db *sql.DB

	mu      sync.Mutex // guards pending and dropped
	pending []netproxy.Decision
	dropped int64
	wake    chan struct{}
	flushed chan struct{} // closed and replaced after each write
	stop    chan struct{}
	done    chan struct{}
	// OnBytes, when set, receives the bytes of each written decision (for
	// usage metering).
	OnBytes func(sessionID string, bytes int64)
}

const (
	netLogKeep    = 1000
	netLogPending = 10000
)

// NewNetLog starts a writer into db's network_log table.
func NewNetLog(db *sql.DB) *NetLog {
	l := &NetLog{db: db, wake: make(chan struct{}, 1), flushed: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go l.loop()
	return l
}

// Add queues a decision; it never blocks. Past netLogPending queued
// decisions, new ones are counted and dropped. The texts a jail wrote are
// cut to their bounds first, whoever made the decision.
func (l *NetLog) Add(d netproxy.Decision) {
	d.Method, d.Target = bound.String(d.Method, 16), bound.String(d.Target, bound.Target)
	d.Host, d.Reason = bound.String(d.Host, bound.Host), bound.String(d.Reason, bound.Reason)
	l.mu.Lock()
	if len(l.pending) >= netLogPending {
		l.dropped++
	} else {
		l.pending = append(l.pending, d)
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Flush waits until what was queued before it is written, or ctx ends.
func (l *NetLog) Flush(ctx context.Context) {
	l.mu.Lock()
	empty := len(l.pending) == 0
	ch := l.flushed
	l.mu.Unlock()
	if empty {
		return
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
	select {
	case <-ch:
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
	}
}

// Close writes what is queued and stops the writer.
func (l *NetLog) Close() {
	close(l.stop)
	<-l.done
}

func (l *NetLog) loop() {
	defer close(l.done)
	for {
		select {
		case <-l.wake:
		case <-l.stop:
			l.write()
			return
		}
		l.write()
		// Let a burst gather into one transaction.
		select {
		case <-time.After(100 * time.Millisecond):
		case <-l.stop:
			l.write()
			return
		}
	}
}

func (l *NetLog) write() {
	l.mu.Lock()
	batch := l.pending
	l.pending = nil
	ch := l.flushed
	l.flushed = make(chan struct{})
	l.mu.Unlock()
	defer close(ch)
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := insertDecisions(ctx, l.db, batch); err != nil {
		return // the in-memory log still has them; the database is best effort
	}
	if l.OnBytes != nil {
		for _, d := range batch {
			if n := d.BytesUp + d.BytesDown; n > 0 {
				l.OnBytes(d.Session, n)
			}
		}
	}
}

func insertDecisions(ctx context.Context, db *sql.DB, batch []netproxy.Decision) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	sessions := map[string]bool{}
	for _, d := range batch {
		_, err := tx.ExecContext(ctx, `INSERT INTO network_log (session_id, ts, method, target, host, port, allowed,
			reason, status, addr, bytes_up, bytes_down) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			d.Session, d.Time.UTC().UnixMilli(), d.Method, d.Target, d.Host, int(d.Port), boolInt(d.Allowed),
			d.Reason, d.Status, d.Addr, d.BytesUp, d.BytesDown)
		if err != nil {
			return fmt.Errorf("insert network decision: %w", err)
		}
		sessions[d.Session] = true
	}
	for id := range sessions {
		if _, err := tx.ExecContext(ctx, `DELETE FROM network_log WHERE session_id = ? AND id <=
			(SELECT id FROM network_log WHERE session_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`, id, id, netLogKeep); err != nil {
			return fmt.Errorf("trim network log: %w", err)
		}
	}
	return tx.Commit()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// networkLog reads session id's newest decisions, oldest first.
func (st *Store) networkLog(ctx context.Context, id string, limit int) ([]netproxy.Decision, error) {
	if limit <= 0 || limit > netLogKeep {
		limit = netLogKeep
	}
	rows, err := st.db.QueryContext(ctx, `SELECT ts, method, target, host, port, allowed, reason, status, addr,
		bytes_up, bytes_down FROM (SELECT * FROM network_log WHERE session_id = ? ORDER BY id DESC LIMIT ?) AS recent ORDER BY id`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("read network log: %w", err)
	}
	defer rows.Close()
	var out []netproxy.Decision
	for rows.Next() {
		d := netproxy.Decision{Session: id}
		var ts int64
		var port, allowed int
		if err := rows.Scan(&ts, &d.Method, &d.Target, &d.Host, &port, &allowed, &d.Reason, &d.Status, &d.Addr,
			&d.BytesUp, &d.BytesDown); err != nil {
			return nil, fmt.Errorf("read network log: %w", err)
		}
		d.Time, d.Port, d.Allowed = time.UnixMilli(ts).UTC(), uint16(port), allowed == 1
		out = append(out, d)
	}
	return out, rows.Err()
}

// NetworkLogOf reads session id's stored decisions (for the CLI, which
// has no proxy of its own to ask), after checking that user owns it.
func (st *Store) NetworkLogOf(ctx context.Context, user, id string, limit int) ([]netproxy.Decision, error) {
	if _, err := st.Get(ctx, user, id); err != nil {
		return nil, err
	}
	return st.networkLog(ctx, id, limit)
}

// DecisionLine renders one proxy decision as the line that the
// network_log tool and 'warren session net-log' print.
func DecisionLine(d netproxy.Decision) string {
	at := d.Time.Local().Format("15:04:05")
	if !d.Allowed {
		return fmt.Sprintf("%s DENY  %-7s %s:%d  %s", at, d.Method, d.Host, d.Port, d.Reason)
	}
	return fmt.Sprintf("%s ALLOW %-7s %s:%d  %d B up, %d B down", at, d.Method, d.Host, d.Port, d.BytesUp, d.BytesDown)
}
