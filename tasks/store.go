package tasks

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

// boardRow is what task_boards holds about the file.
type boardRow struct {
	base      map[int]item
	rawBase   string
	next      int
	sig       string
	conflicts map[int]bool
	rawConfl  string
}

// loadBoard reads the sync base, the next task number and what the last
// sync saw of the file.
func loadBoard(ctx context.Context, q querier, id int64) (boardRow, error) {
	var r boardRow
	if err := q.QueryRowContext(ctx, `SELECT base, next_num, file_sig, conflicts FROM task_boards WHERE id = ?`, id).
		Scan(&r.rawBase, &r.next, &r.sig, &r.rawConfl); err != nil {
		return r, fmt.Errorf("load board: %w", err)
	}
	r.base = map[int]item{}
	if err := json.Unmarshal([]byte(r.rawBase), &r.base); err != nil {
		return r, fmt.Errorf("decode sync base: %w", err)
	}
	var nums []int
	if err := json.Unmarshal([]byte(r.rawConfl), &nums); err != nil {
		return r, fmt.Errorf("decode conflicts: %w", err)
	}
	r.conflicts = map[int]bool{}
	for _, n := range nums {
		r.conflicts[n] = true
	}
	return r, nil
}

// fileState is the part of the board row that a change to one task reads.
func fileState(ctx context.Context, q querier, id int64) (sig string, conflicts map[int]bool, err error) {
	var raw string
	if err := q.QueryRowContext(ctx, `SELECT file_sig, conflicts FROM task_boards WHERE id = ?`, id).Scan(&sig, &raw); err != nil {
		return "", nil, fmt.Errorf("load board: %w", err)
	}
	var nums []int
	if err := json.Unmarshal([]byte(raw), &nums); err != nil {
		return "", nil, fmt.Errorf("decode conflicts: %w", err)
	}
	conflicts = map[int]bool{}
	for _, n := range nums {
		conflicts[n] = true
	}
	return sig, conflicts, nil
}

// saveNext records the next task number.
func saveNext(ctx context.Context, q querier, id int64, next int) error {
	if _, err := q.ExecContext(ctx, `UPDATE task_boards SET next_num = CASE WHEN next_num > ?1 THEN next_num ELSE ?1 END WHERE id = ?2`, next, id); err != nil {
		return fmt.Errorf("save board: %w", err)
	}
	return nil
}

// saveSynced records what the file says after a sync, when that changed.
func saveSynced(ctx context.Context, q querier, id int64, old boardRow, base map[int]item, sig string, conflicts map[int]bool, now time.Time) error {
	raw, err := json.Marshal(base)
	if err != nil {
		return fmt.Errorf("encode sync base: %w", err)
	}
	nums := sortedKeys(conflicts)
	rawConfl, err := json.Marshal(nums)
	if err != nil {
		return fmt.Errorf("encode conflicts: %w", err)
	}
	if string(raw) == old.rawBase && sig == old.sig && string(rawConfl) == old.rawConfl {
		return nil // nothing to write: a read works on a full disk
	}
	if _, err := q.ExecContext(ctx, `UPDATE task_boards SET base = ?, file_sig = ?, conflicts = ?, synced_at = ? WHERE id = ?`,
		string(raw), sig, string(rawConfl), ms(now), id); err != nil {
		return fmt.Errorf("save board: %w", err)
	}
	return nil
}

// loadItems reads tasks of a board as the file shows them: with their
// last shownNotes notes, and the count of the older ones. nums nil reads
// every task.
func loadItems(ctx context.Context, q querier, id int64, nums []int) (map[int]item, error) {
	where, args := "", []any{id}
	if nums != nil {
		if len(nums) == 0 {
			return map[int]item{}, nil
		}
		where = " AND num IN (" + strings.Repeat("?,", len(nums)-1) + "?)"
		for _, n := range nums {
			args = append(args, n)
		}
	}
	rows, err := q.QueryContext(ctx, `SELECT num, title, status, owner, link FROM tasks WHERE board_id = ?`+where, args...)
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
		it.Notes = []Note{}
		items[it.Num] = it
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("load tasks: %w", err)
	}
	rows, err = q.QueryContext(ctx, `SELECT num, at, author, text, total FROM (
		SELECT num, seq, at, author, text,
			row_number() OVER (PARTITION BY num ORDER BY seq DESC) AS back,
			count(*) OVER (PARTITION BY num) AS total
		FROM task_notes WHERE board_id = ?`+where+`) AS recent WHERE back <= ? ORDER BY num, seq`, append(args, shownNotes)...)
	if err != nil {
		return nil, fmt.Errorf("load notes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var num, total int
		var at int64
		var n Note
		if err := rows.Scan(&num, &at, &n.By, &n.Text, &total); err != nil {
			return nil, fmt.Errorf("scan note: %w", err)
		}
		n.At = fromMS(at)
		it := items[num]
		it.Notes = append(it.Notes, n)
		it.Older = total - min(total, shownNotes)
		items[num] = it
	}
	return items, rows.Err()
}

// loadTasks reads tasks with all their notes and their live claims: every
// task of the board when nums is nil.
func loadTasks(ctx context.Context, q querier, id int64, nums []int, now time.Time) (map[int]Task, error) {
	where, args := "", []any{id}
	if nums != nil {
		if len(nums) == 0 {
			return map[int]Task{}, nil
		}
		where = " AND num IN (" + strings.Repeat("?,", len(nums)-1) + "?)"
		for _, n := range nums {
			args = append(args, n)
		}
	}
	rows, err := q.QueryContext(ctx, `SELECT num, title, status, owner, link FROM tasks WHERE board_id = ?`+where, args...)
	if err != nil {
		return nil, fmt.Errorf("load tasks: %w", err)
	}
	out := map[int]Task{}
	for rows.Next() {
		var n int
		var t Task
		if err := rows.Scan(&n, &t.Title, &t.Status, &t.Owner, &t.Link); err != nil {
			rows.Close()
			return nil, fmt.Errorf("scan task: %w", err)
		}
		t.ID = taskID(n)
		out[n] = t
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("load tasks: %w", err)
	}
	rows, err = q.QueryContext(ctx, `SELECT num, at, author, text FROM task_notes WHERE board_id = ?`+where+` ORDER BY num, seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("load notes: %w", err)
	}
	for rows.Next() {
		var n int
		var at int64
		var note Note
		if err := rows.Scan(&n, &at, &note.By, &note.Text); err != nil {
			rows.Close()
			return nil, fmt.Errorf("scan note: %w", err)
		}
		note.At = fromMS(at)
		t := out[n]
		t.Notes = append(t.Notes, note)
		out[n] = t
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("load notes: %w", err)
	}
	if nums != nil {
		for _, n := range nums {
			c, err := liveClaim(ctx, q, id, n, now)
			if err != nil {
				return nil, err
			}
			if t, ok := out[n]; ok && c != nil {
				t.Claim = c
				out[n] = t
			}
		}
		return out, nil
	}
	claims, err := loadClaims(ctx, q, id, now)
	if err != nil {
		return nil, err
	}
	for n, c := range claims {
		if t, ok := out[n]; ok {
			t.Claim = &c
			out[n] = t
		}
	}
	return out, nil
}

// saveItem writes a task as the file shows it: its fields, and its shown
// notes in place of those the board had shown; the it.Older oldest notes
// stay as they are. An upsert, not INSERT OR REPLACE, because replacing
// the row would cascade to its claim.
func saveItem(ctx context.Context, q querier, id int64, it item, now time.Time) error {
	if err := saveFields(ctx, q, id, it, now); err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, `DELETE FROM task_notes WHERE board_id = ?1 AND num = ?2 AND seq NOT IN (
		SELECT seq FROM task_notes WHERE board_id = ?1 AND num = ?2 ORDER BY seq LIMIT ?3)`, id, it.Num, it.Older); err != nil {
		return fmt.Errorf("clear notes of %s: %w", taskID(it.Num), err)
	}
	for _, n := range it.Notes {
		if err := addNote(ctx, q, id, it.Num, n); err != nil {
			return err
		}
	}
	return nil
}

// saveFields writes a task's row, not its notes.
func saveFields(ctx context.Context, q querier, id int64, it item, now time.Time) error {
	if _, err := q.ExecContext(ctx, `INSERT INTO tasks (board_id, num, title, status, owner, link, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (board_id, num) DO UPDATE SET title = excluded.title, status = excluded.status,
			owner = excluded.owner, link = excluded.link, updated_at = excluded.updated_at`,
		id, it.Num, it.Title, string(it.Status), it.Owner, it.Link, ms(now), ms(now)); err != nil {
		return fmt.Errorf("save %s: %w", taskID(it.Num), err)
	}
	if it.Status == StatusDone {
		// A finished task has nothing left to hold, however it got done.
		if _, err := q.ExecContext(ctx, `DELETE FROM task_claims WHERE board_id = ? AND num = ?`, id, it.Num); err != nil {
			return fmt.Errorf("release %s: %w", taskID(it.Num), err)
		}
	}
	return nil
}

// addNote appends a note to a task.
func addNote(ctx context.Context, q querier, id int64, num int, n Note) error {
	if _, err := q.ExecContext(ctx, `INSERT INTO task_notes (board_id, num, seq, at, author, text)
		VALUES (?1, ?2, (SELECT coalesce(max(seq), -1) + 1 FROM task_notes WHERE board_id = ?1 AND num = ?2), ?3, ?4, ?5)`,
		id, num, ms(n.At), n.By, n.Text); err != nil {
		return fmt.Errorf("save note of %s: %w", taskID(num), err)
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
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load claim of %s: %w", taskID(num), err)
	}
	c.ClaimedAt, c.ExpiresAt = fromMS(at), fromMS(until)
	return &c, nil
}
