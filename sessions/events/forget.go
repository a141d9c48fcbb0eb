package events

import (
	"context"
	"fmt"
)

// Forget removes session's activity log, from the database and from
// memory, and drops whatever is appended for it later (the result of the
// call that deleted it, a command's last output). For a session that was
// deleted: its log goes with it. The ids forgotten are kept for the life
// of the process, a few bytes per deleted session.
func (l *Log) Forget(ctx context.Context, session string) error {
	l.mu.Lock()
	l.gone[session] = true
	kept := l.pending[:0]
	for _, e := range l.pending {
		if e.Session != session {
			kept = append(kept, e)
		}
	}
	clear(l.pending[len(kept):])
	l.pending = kept
	delete(l.next, session)
	delete(l.lastAt, session)
	if ch, ok := l.signals[session]; ok {
		close(ch) // a watcher wakes and finds nothing more
		delete(l.signals, session)
	}
	l.mu.Unlock()
	// After a write in flight (which may hold its events), before the next
	// (which leaves them out).
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	delete(l.trimmed, session)
	if _, err := l.db.ExecContext(ctx, `DELETE FROM session_events WHERE session_id = ?`, session); err != nil {
		return fmt.Errorf("remove the activity log of session %s: %w", session, err)
	}
	return nil
}

// isGone reports whether session was forgotten. Called with l.mu held.
func (l *Log) isGone(session string) bool { return l.gone[session] }

// Sweep forgets the logs of sessions that no longer exist (exists says
// false): those deleted while no server ran this log (the CLI), or by
// versions that kept them. A server calls it when it starts. It returns
// how many sessions' logs it removed.
func (l *Log) Sweep(ctx context.Context, exists func(ctx context.Context, session string) (bool, error)) (int, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT DISTINCT session_id FROM session_events`)
	if err != nil {
		return 0, fmt.Errorf("list activity logs: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("list activity logs: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("list activity logs: %w", err)
	}
	n := 0
	for _, id := range ids {
		ok, err := exists(ctx, id)
		if err != nil {
			return n, err
		}
		if ok {
			continue
		}
		if err := l.Forget(ctx, id); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
