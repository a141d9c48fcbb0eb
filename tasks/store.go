package tasks

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// loadBoard reads the sync base and the next task number.
func loadBoard(ctx context.Context, q querier, id int64) (map[int]item, int, error) {
	var raw string
	var next int
	if err := q.QueryRowContext(ctx, `SELECT base, next_num FROM task_boards WHERE id = ?`, id).Scan(&raw, &next); err != nil {
		return nil, 0, fmt.Errorf("load board: %w", err)
	}
	base := map[int]item{}
	if err := json.Unmarshal([]byte(raw), &base); err != nil {
		return nil, 0, fmt.Errorf("decode sync base: %w", err)
	}
	return base, next, nil
}

// saveBoard records the sync base and the next task number.
func saveBoard(ctx context.Context, q querier, id int64, base map[int]item, next int, now time.Time) error {
	raw, err := json.Marshal(base)
	if err != nil {
		return fmt.Errorf("encode sync base: %w", err)
	}
	if _, err := q.ExecContext(ctx, `UPDATE task_boards SET base = ?, next_num = ?, synced_at = ? WHERE id = ?`,
		string(raw), next, ms(now), id); err != nil {
		return fmt.Errorf("save board: %w", err)
	}
	return nil
}

// loadItems reads every task of a board with its notes.
func loadItems(ctx context.Context, q querier, id int64) (map[int]item, error) {
	rows, err := q.QueryContext(ctx, `SELECT num, title, status, owner, link FROM tasks WHERE board_id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("load tasks: %w", err)
	}
	items := map[int]item{}
	for rows.Next() {
		var it item
		if err := rows.Scan(&it.Num, &it.Title, &it.Status, &it.Owner, &it.Link); err != nil {
			rows.Close()
			return nil, fmt.Errorf("scan task: %w", err)
		}
		items[it.Num] = it
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("load tasks: %w", err)
	}
	rows, err = q.QueryContext(ctx, `SELECT num, at, author, text FROM task_notes WHERE board_id = ? ORDER BY num, seq`, id)
	if err != nil {
		return nil, fmt.Errorf("load notes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var num int
		var at int64
		var n Note
		if err := rows.Scan(&num, &at, &n.By, &n.Text); err != nil {
			return nil, fmt.Errorf("scan note: %w", err)
		}
		n.At = fromMS(at)
		it := items[num]
		it.Notes = append(it.Notes, n)
		items[num] = it
	}
	return items, rows.Err()
}

// saveItem writes a task and replaces its notes. An upsert, not INSERT OR
// REPLACE, because replacing the row would cascade to its claim.
func saveItem(ctx context.Context, q querier, id int64, it item, now time.Time) error {
	if _, err := q.ExecContext(ctx, `INSERT INTO tasks (board_id, num, title, status, owner, link, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (board_id, num) DO UPDATE SET title = excluded.title, status = excluded.status,
			owner = excluded.owner, link = excluded.link, updated_at = excluded.updated_at`,
		id, it.Num, it.Title, string(it.Status), it.Owner, it.Link, ms(now), ms(now)); err != nil {
		return fmt.Errorf("save %s: %w", taskID(it.Num), err)
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM task_notes WHERE board_id = ? AND num = ?`, id, it.Num); err != nil {
		return fmt.Errorf("clear notes of %s: %w", taskID(it.Num), err)
	}
	for i, n := range it.Notes {
		if _, err := q.ExecContext(ctx, `INSERT INTO task_notes (board_id, num, seq, at, author, text) VALUES (?, ?, ?, ?, ?, ?)`,
			id, it.Num, i, ms(n.At), n.By, n.Text); err != nil {
			return fmt.Errorf("save note of %s: %w", taskID(it.Num), err)
		}
	}
	if it.Status == StatusDone {
		// A finished task has nothing left to hold, however it got done.
		if _, err := q.ExecContext(ctx, `DELETE FROM task_claims WHERE board_id = ? AND num = ?`, id, it.Num); err != nil {
			return fmt.Errorf("release %s: %w", taskID(it.Num), err)
		}
	}
	return nil
}

// deleteItem removes a task; its notes and claim go with it.
func deleteItem(ctx context.Context, q querier, id int64, num int) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM tasks WHERE board_id = ? AND num = ?`, id, num); err != nil {
		return fmt.Errorf("delete %s: %w", taskID(num), err)
	}
	return nil
}

// loadClaims reads the live claims of a board.
func loadClaims(ctx context.Context, q querier, id int64, now time.Time) (map[int]Claim, error) {
	rows, err := q.QueryContext(ctx, `SELECT num, holder_user, holder_session, claimed_at, expires_at
		FROM task_claims WHERE board_id = ? AND expires_at > ?`, id, ms(now))
	if err != nil {
		return nil, fmt.Errorf("load claims: %w", err)
	}
	defer rows.Close()
	claims := map[int]Claim{}
	for rows.Next() {
		var num int
		var c Claim
		var at, until int64
		if err := rows.Scan(&num, &c.Holder.User, &c.Holder.Session, &at, &until); err != nil {
			return nil, fmt.Errorf("scan claim: %w", err)
		}
		c.ClaimedAt, c.ExpiresAt = fromMS(at), fromMS(until)
		claims[num] = c
	}
	return claims, rows.Err()
}

// liveClaim returns the live claim on one task, if any.
func liveClaim(ctx context.Context, q querier, id int64, num int, now time.Time) (*Claim, error) {
	var c Claim
	var at, until int64
	err := q.QueryRowContext(ctx, `SELECT holder_user, holder_session, claimed_at, expires_at
		FROM task_claims WHERE board_id = ? AND num = ? AND expires_at > ?`, id, num, ms(now)).
		Scan(&c.Holder.User, &c.Holder.Session, &at, &until)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load claim of %s: %w", taskID(num), err)
	}
	c.ClaimedAt, c.ExpiresAt = fromMS(at), fromMS(until)
	return &c, nil
}
