package sessions

import (
	"context"
	"errors"
	"fmt"
)

// A deleted session keeps nothing in the database but its usage records
// (metering's, billing data): Delete removes its row and its network log
// here, and OnDelete lets the server remove what other packages hold of it
// (its activity log). Older versions kept a row in state "deleted" as a
// tombstone; PurgeDeleted removes those, and whatever a purge that failed
// or a CLI delete left, when a server starts.

// OnDeleteFunc removes what another package holds of a deleted session.
type OnDeleteFunc func(ctx context.Context, sessionID string) error

// SetOnDelete sets the hook Delete runs once a deleted session's rows are
// gone: serve opens the activity log after the manager.
func (m *Manager) SetOnDelete(fn OnDeleteFunc) {
	m.mu.Lock()
	m.onDelete = fn
	m.mu.Unlock()
}

// purge removes a deleted session's rows and runs the OnDelete hook.
func (m *Manager) purge(ctx context.Context, id string) error {
	if err := m.store.purge(ctx, id); err != nil {
		return err
	}
	m.mu.Lock()
	fn := m.onDelete
	m.mu.Unlock()
	if fn != nil {
		return fn(ctx, id)
	}
	return nil
}

// PurgeDeleted removes the sessions left in state deleted (the tombstones
// of older versions, or a delete whose files or rows could not be removed
// then): their files warren made, then their rows. It also drops network
// log rows of sessions that no longer exist. It returns how many sessions
// it removed.
func (m *Manager) PurgeDeleted(ctx context.Context) (int, error) {
	ids, err := m.store.deletedIDs(ctx)
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, d := range ids {
		unlock := m.opLock(d.id)
		var files []error
		if d.mode != ModeBind { // never the user's own directory
			files = append(files, forceRemove(m.workspaceDir(d.id)))
		}
		files = append(files, forceRemove(m.auditDir(d.id)), forceRemove(m.homeDir(d.id)))
		if rm := m.cfg.RemoveRunner; rm != nil {
			files = append(files, rm(ctx, d.id))
		}
		err := errors.Join(files...)
		if err == nil {
			err = m.purge(ctx, d.id)
		}
		unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("deleted session %s: %w", d.id, err))
			continue
		}
		n++
	}
	if _, err := m.store.db.ExecContext(ctx,
		`DELETE FROM network_log WHERE session_id NOT IN (SELECT id FROM sessions)`); err != nil {
		errs = append(errs, fmt.Errorf("network log of deleted sessions: %w", err))
	}
	return n, errors.Join(errs...)
}

type deletedRow struct {
	id   string
	mode Mode
}

// deletedIDs lists the sessions in state deleted.
func (st *Store) deletedIDs(ctx context.Context) ([]deletedRow, error) {
	rows, err := st.db.QueryContext(ctx, `SELECT id, mode FROM sessions WHERE state = 'deleted'`)
	if err != nil {
		return nil, fmt.Errorf("list deleted sessions: %w", err)
	}
	defer rows.Close()
	var out []deletedRow
	for rows.Next() {
		var d deletedRow
		if err := rows.Scan(&d.id, &d.mode); err != nil {
			return nil, fmt.Errorf("list deleted sessions: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// purge removes session id's row and its network log in one transaction.
func (st *Store) purge(ctx context.Context, id string) error {
	tx, err := st.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("remove session %s: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after commit
	// The lease goes too: a replica still driving the deleted session's
	// jail finds its lease gone at its next renewal and stops the jail.
	for _, q := range []string{`DELETE FROM network_log WHERE session_id = ?`, `DELETE FROM session_leases WHERE session_id = ?`,
		`DELETE FROM sessions WHERE id = ?`} {
		if _, err := tx.ExecContext(ctx, q, id); err != nil {
			return fmt.Errorf("remove session %s: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("remove session %s: %w", id, err)
	}
	return nil
}
