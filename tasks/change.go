package tasks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// A change to one task (claim, update, add, release) reads and writes
// that task only, in one short transaction, so that it costs the same on
// a board of any size; the file is written afterwards by a sync (at once,
// or coalesced in the background, see Options.Coalesce). Before the
// change, a stat of the file tells whether anyone touched it since the
// last sync: if so, the hand edit is merged first, so that a task just
// added by hand can be claimed, and an edit is not taken for a conflict.

// edit is a change to one task inside its transaction.
type edit struct {
	tx      *sql.Tx
	board   *Board
	now     time.Time
	n       int
	it      item // fields only: the notes are not loaded
	note    *Note
	changed bool // it must be saved
}

// errInConflict says the task is in conflict: a sync tells the details.
var errInConflict = errors.New("task in conflict")

// pickNext, as the task number of a change, has changeOnce pick the task
// (nextFree) inside the change's transaction.
const pickNext = 0

// change applies fn to task n (pickNext: the next free task).
func (b *Board) change(ctx context.Context, n int, fn func(ctx context.Context, e *edit) error) (Task, error) {
	ctx, span := tracer.Start(ctx, "tasks.change") // the database write and TASKS.md
	defer span.End()
	warn, err := b.prepare(ctx)
	if err != nil {
		return Task{}, err
	}
	for attempt := 0; ; attempt++ {
		task, gen, err := b.changeOnce(ctx, n, fn)
		touched := gen > 0
		if errors.Is(err, errInConflict) {
			// Settled by hand since? A sync tells.
			st, serr := b.sync(ctx, nil, nil)
			if st != nil && st.conflicts[n] || attempt > 0 {
				return Task{}, &ConflictError{Path: b.path, Conflicts: []Conflict{conflictOf(st, n)}}
			}
			if st == nil && serr != nil {
				return Task{}, serr
			}
			continue
		}
		if err != nil {
			return Task{}, err
		}
		if touched {
			if w := b.written(ctx, gen); w != nil {
				warn = w
			}
		}
		return task, warn
	}
}

func conflictOf(st *state, n int) Conflict {
	if st != nil {
		for _, c := range st.report.Conflicts {
			if c.TaskID == taskID(n) {
				return c
			}
		}
	}
	return Conflict{TaskID: taskID(n)}
}

// prepare merges the file first when it changed since the last sync. A
// file that cannot be used (a link, a FIFO, too big, unwritable) does not
// stop the change, which stands on the board: it comes back as a warning.
// A file the board cannot read as tasks (an id used twice) stops it.
func (b *Board) prepare(ctx context.Context) (warn error, err error) {
	sig := b.statSig(ctx)
	if b.wrote(sig) {
		return nil, nil // the file this Board wrote last: no hand edit
	}
	stored, _, err := fileState(ctx, b.db, b.id)
	if err != nil {
		return nil, err
	}
	if sig == stored {
		return nil, nil
	}
	_, err = b.sync(ctx, nil, nil)
	switch {
	case err == nil, errors.Is(err, ErrConflict):
		return nil, nil
	case ErrorCode(err) == CodeInvalid:
		return nil, err
	}
	return unwritten(b.path, err), nil
}

// changeOnce runs fn on task n in a write transaction and returns the
// task after it, and the change's generation when the file must be
// written (0 when not).
func (b *Board) changeOnce(ctx context.Context, n int, fn func(ctx context.Context, e *edit) error) (Task, uint64, error) {
	tx, err := b.db.BeginTx(ctx, writeTx)
	if err != nil {
		return Task{}, 0, fmt.Errorf("begin change: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after commit
	e := &edit{tx: tx, board: b, now: b.now().UTC(), n: n}
	_, conflicts, err := fileState(ctx, tx, b.id)
	if err != nil {
		return Task{}, 0, err
	}
	if n == pickNext {
		if n, err = b.nextFree(ctx, tx, e.now, conflicts); err != nil {
			return Task{}, 0, err
		}
		e.n = n
	}
	err = tx.QueryRowContext(ctx, `SELECT title, status, owner, link FROM tasks WHERE board_id = ? AND num = ?`, b.id, n).
		Scan(&e.it.Title, &e.it.Status, &e.it.Owner, &e.it.Link)
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, 0, notFound(n)
	}
	if err != nil {
		return Task{}, 0, fmt.Errorf("load %s: %w", taskID(n), err)
	}
	e.it.Num = n
	if conflicts[n] {
		return Task{}, 0, errInConflict
	}
	if err := fn(ctx, e); err != nil {
		return Task{}, 0, err
	}
	if e.changed {
		if err := saveFields(ctx, tx, b.id, e.it, e.now); err != nil {
			return Task{}, 0, err
		}
	}
	if e.note != nil {
		if err := addNote(ctx, tx, b.id, n, *e.note); err != nil {
			return Task{}, 0, err
		}
	}
	got, err := loadTasks(ctx, tx, b.id, []int{n}, e.now)
	if err != nil {
		return Task{}, 0, err
	}
	if e.changed || e.note != nil {
		it := itemOf(got[n])
		gen, err := b.commit(tx, n, &it)
		if err != nil {
			return Task{}, 0, fmt.Errorf("commit change: %w", err)
		}
		return got[n], gen, nil
	}
	if err := tx.Commit(); err != nil {
		return Task{}, 0, fmt.Errorf("commit change: %w", err)
	}
	return got[n], 0, nil
}

// checkHolder fails when someone other than by holds a live claim on the
// task, and reports whether by holds it.
func (e *edit) checkHolder(ctx context.Context, by Holder) (bool, error) {
	c, err := liveClaim(ctx, e.tx, e.board.id, e.n, e.now)
	if err != nil || c == nil {
		return false, err
	}
	if c.Holder != by {
		return false, &ClaimedError{TaskID: taskID(e.n), Holder: c.Holder, Until: c.ExpiresAt}
	}
	return true, nil
}

// Add creates an open task with the next free id and writes it to the file.
func (b *Board) Add(ctx context.Context, title string) (Task, error) {
	title = strings.TrimSpace(title)
	if err := checkTitle(title); err != nil {
		return Task{}, err
	}
	warn, err := b.prepare(ctx)
	if err != nil {
		return Task{}, err
	}
	task, gen, err := b.add(ctx, title)
	if err != nil {
		return Task{}, err
	}
	if w := b.written(ctx, gen); w != nil {
		warn = w
	}
	return task, warn
}

func (b *Board) add(ctx context.Context, title string) (Task, uint64, error) {
	tx, err := b.db.BeginTx(ctx, writeTx)
	if err != nil {
		return Task{}, 0, fmt.Errorf("begin add: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after commit
	now := b.now().UTC()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT next_num FROM task_boards WHERE id = ?`, b.id).Scan(&n); err != nil {
		return Task{}, 0, fmt.Errorf("load board: %w", err)
	}
	it := item{Num: n, Title: title, Status: StatusOpen}
	if err := saveFields(ctx, tx, b.id, it, now); err != nil {
		return Task{}, 0, err
	}
	if err := saveNext(ctx, tx, b.id, n+1); err != nil {
		return Task{}, 0, err
	}
	gen, err := b.commit(tx, n, &item{Num: n, Title: title, Status: StatusOpen, Notes: []Note{}})
	if err != nil {
		return Task{}, 0, fmt.Errorf("commit add: %w", err)
	}
	return Task{ID: taskID(n), Title: title, Status: StatusOpen}, gen, nil
}
