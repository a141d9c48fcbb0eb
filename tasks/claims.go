package tasks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// A claim is a row in task_claims with an expiry. Taking one is a single
// upsert whose WHERE clause only lets it through when the row is free
// (absent or expired) or already the caller's, so of two claimers exactly
// one wins even across processes.

const claimSQL = `INSERT INTO task_claims (board_id, num, holder_user, holder_session, claimed_at, expires_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (board_id, num) DO UPDATE SET
	holder_user = excluded.holder_user,
	holder_session = excluded.holder_session,
	claimed_at = CASE WHEN task_claims.holder_user = excluded.holder_user
		AND task_claims.holder_session = excluded.holder_session
		AND task_claims.expires_at > ?5 THEN task_claims.claimed_at ELSE excluded.claimed_at END,
	expires_at = excluded.expires_at
WHERE task_claims.expires_at <= ?5
	OR (task_claims.holder_user = excluded.holder_user AND task_claims.holder_session = excluded.holder_session)
RETURNING claimed_at`

// Claim gives holder a lease of the given length on the task (the board's
// default lease when zero). Claiming a task one already holds renews it.
// When someone else holds a live claim the error is a *ClaimedError naming
// them (errors.Is(err, ErrClaimed)). Claiming sets the task's owner to
// holder.User and moves an open task to in_progress; a done task cannot
// be claimed.
func (b *Board) Claim(ctx context.Context, id string, holder Holder, lease time.Duration) (Task, error) {
	t, err := b.claim(ctx, id, holder, lease, false)
	countClaim(err) // metrics.go
	return t, err
}

// Renew extends holder's claim on the task. It fails with CodeClaimed when
// the holder no longer has it (someone else took it after it expired, or
// it was released).
func (b *Board) Renew(ctx context.Context, id string, holder Holder, lease time.Duration) (Task, error) {
	t, err := b.claim(ctx, id, holder, lease, true)
	countClaim(err)
	return t, err
}

func (b *Board) claim(ctx context.Context, id string, holder Holder, lease time.Duration, renew bool) (Task, error) {
	n, err := parseID(id)
	if err != nil {
		return Task{}, err
	}
	if err := checkHolder(holder); err != nil {
		return Task{}, err
	}
	if lease < 0 {
		return Task{}, invalidf("lease must not be negative")
	}
	if lease == 0 {
		lease = b.lease
	}
	return b.change(ctx, n, b.claimEdit(holder, lease, renew))
}

// claimEdit is the change that takes (or with renew, extends) holder's
// claim on the edited task.
func (b *Board) claimEdit(holder Holder, lease time.Duration, renew bool) func(ctx context.Context, e *edit) error {
	return func(ctx context.Context, e *edit) error {
		if e.it.Status == StatusDone {
			return &Error{Code: CodeInvalid, TaskID: taskID(e.n), Message: taskID(e.n) + " is done: set its status to open before claiming it"}
		}
		if renew {
			if err := e.mustHold(ctx, holder); err != nil {
				return err
			}
		}
		var at int64
		err := e.tx.QueryRowContext(ctx, claimSQL, b.id, e.n, holder.User, holder.Session,
			ms(e.now), ms(e.now.Add(lease))).Scan(&at)
		if errors.Is(err, sql.ErrNoRows) {
			c, err := liveClaim(ctx, e.tx, b.id, e.n, e.now)
			if err != nil {
				return err
			}
			if c == nil { // cannot happen inside the write lock; say so plainly
				return fmt.Errorf("claim %s: lost a race with an expiring claim", taskID(e.n))
			}
			return &ClaimedError{TaskID: taskID(e.n), Holder: c.Holder, Until: c.ExpiresAt}
		}
		if err != nil {
			return fmt.Errorf("claim %s: %w", taskID(e.n), err)
		}
		if e.it.Owner != holder.User || e.it.Status == StatusOpen {
			e.it.Owner = holder.User
			if e.it.Status == StatusOpen {
				e.it.Status = StatusInProgress
			}
			e.changed = true
		}
		return nil
	}
}

// ClaimNext claims the open task with the lowest number that nobody holds
// a live claim on (see Claim), and fails with CodeNotFound when there is
// none. Claimers racing for the next task each get a different one. On
// PostgreSQL the task's row is picked FOR UPDATE SKIP LOCKED: a claimer
// passes over a task another claimer is taking instead of queueing on it.
func (b *Board) ClaimNext(ctx context.Context, holder Holder, lease time.Duration) (Task, error) {
	t, err := b.claimNext(ctx, holder, lease)
	countClaim(err)
	return t, err
}

func (b *Board) claimNext(ctx context.Context, holder Holder, lease time.Duration) (Task, error) {
	if err := checkHolder(holder); err != nil {
		return Task{}, err
	}
	if lease < 0 {
		return Task{}, invalidf("lease must not be negative")
	}
	if lease == 0 {
		lease = b.lease
	}
	return b.change(ctx, pickNext, b.claimEdit(holder, lease, false))
}

// nextFreeSQL lists the open tasks without a live claim, lowest first.
const nextFreeSQL = `SELECT num FROM tasks WHERE board_id = ?1 AND status = 'open'
	AND NOT EXISTS (SELECT 1 FROM task_claims c WHERE c.board_id = tasks.board_id AND c.num = tasks.num AND c.expires_at > ?2)
	ORDER BY num LIMIT 50`

// nextFree picks the task ClaimNext takes, in its transaction: the first
// free one not in conflict.
func (b *Board) nextFree(ctx context.Context, tx *sql.Tx, now time.Time, conflicts map[int]bool) (int, error) {
	q := nextFreeSQL
	if b.pg {
		q += ` FOR UPDATE SKIP LOCKED`
	}
	rows, err := tx.QueryContext(ctx, q, b.id, ms(now))
	if err != nil {
		return 0, fmt.Errorf("find the next free task: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			return 0, fmt.Errorf("find the next free task: %w", err)
		}
		if !conflicts[n] {
			return n, nil
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("find the next free task: %w", err)
	}
	return 0, &Error{Code: CodeNotFound, Message: "no open task without a claim on the board: add one, or wait for a claim to end"}
}

// mustHold fails unless holder has the claim on the task (live, or
// expired but not taken by anyone since).
func (e *edit) mustHold(ctx context.Context, holder Holder) error {
	n := e.n
	var h Holder
	var until int64
	err := e.tx.QueryRowContext(ctx, `SELECT holder_user, holder_session, expires_at FROM task_claims
		WHERE board_id = ? AND num = ?`, e.board.id, n).Scan(&h.User, &h.Session, &until)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("load claim of %s: %w", taskID(n), err)
	case h == holder:
		return nil
	case until > ms(e.now):
		return &ClaimedError{TaskID: taskID(n), Holder: h, Until: fromMS(until)}
	}
	return &Error{Code: CodeClaimed, TaskID: taskID(n), Message: fmt.Sprintf("%s is not claimed by %s", taskID(n), holder)}
}

// Release gives up holder's claim on the task. The task keeps its status
// and owner; the file, which shows no claims, is not rewritten.
func (b *Board) Release(ctx context.Context, id string, holder Holder) error {
	n, err := parseID(id)
	if err != nil {
		return err
	}
	_, err = b.change(ctx, n, func(ctx context.Context, e *edit) error {
		if err := e.mustHold(ctx, holder); err != nil {
			return err
		}
		_, err := e.tx.ExecContext(ctx, `DELETE FROM task_claims WHERE board_id = ? AND num = ?`, b.id, n)
		if err != nil {
			return fmt.Errorf("release %s: %w", taskID(n), err)
		}
		return nil
	})
	if errors.Is(err, ErrNotWritten) {
		return nil // nothing of the file changed
	}
	return err
}

// ReleaseSession releases every claim held by a session, on every board
// in the database: call it when a session is archived or deleted. It
// returns how many claims were released. Tasks keep their status and
// owner; the file is not rewritten.
func (b *Board) ReleaseSession(ctx context.Context, sessionID string) (int, error) {
	if sessionID == "" {
		return 0, invalidf("release session: a session id is required")
	}
	res, err := b.db.ExecContext(ctx, `DELETE FROM task_claims WHERE holder_session = ?`, sessionID)
	if err != nil {
		return 0, fmt.Errorf("release session %s: %w", sessionID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("release session %s: %w", sessionID, err)
	}
	return int(n), nil
}

// ClaimOf returns the task on this board that a session holds a live
// claim on (the most recently claimed one if it holds several), and false
// when it holds none. It reads the database only, so it is cheap enough
// to call on every metered event.
func (b *Board) ClaimOf(ctx context.Context, sessionID string) (Task, bool, error) {
	now := b.now().UTC()
	var num int
	err := b.db.QueryRowContext(ctx, `SELECT num FROM task_claims
		WHERE board_id = ? AND holder_session = ? AND expires_at > ?
		ORDER BY claimed_at DESC, num DESC LIMIT 1`, b.id, sessionID, ms(now)).Scan(&num)
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, false, nil
	}
	if err != nil {
		return Task{}, false, fmt.Errorf("find claim of session %s: %w", sessionID, err)
	}
	got, err := loadTasks(ctx, b.db, b.id, []int{num}, now)
	if err != nil {
		return Task{}, false, err
	}
	return got[num], true, nil
}

// checkHolder validates a claimant.
func checkHolder(h Holder) error {
	if err := checkUser(h.User); err != nil {
		return err
	}
	if strings.TrimSpace(h.Session) == "" {
		return invalidf("a session id is required to claim a task")
	}
	return checkText("session id", h.Session)
}
