package tasks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sessions/sqlschema"
)

// writer orders the file's writes for a Board with Options.Coalesce (the
// server). A change returns only once the file holds it, so that an agent
// that adds a task and then reads or commits TASKS.md sees it; changes
// made while a write runs share the next one (see writeThrough). The
// sync base those writes leave is saved to the database a little later,
// in the background (see background): the database is the source of truth, so
// a crash before that loses nothing, and the next sync finds the file
// agreeing with the board.
type writer struct {
	mu      sync.Mutex
	timer   *time.Timer // set while a background sync is scheduled
	running sync.WaitGroup
	closed  bool
	written string // signature of the file this Board wrote last

	gen     uint64        // changes counted so far, in commit order
	doneGen uint64        // every change up to this one is in the file, or failed with doneErr
	doneErr error         // what the last sync could not do (an unwrittenError), or nil
	dirty   map[int]*item // tasks changed since the last sync took the set, as changed
}

// commit commits a change to task n, which leaves it as it says, and
// returns the change's generation: a sync that starts after this call
// includes it. Changes commit one at a time (SQLite's write lock), and
// commitMu keeps the order in which their tasks are recorded for the next
// write the same: the last one recorded is the task as the database has it.
func (b *Board) commit(tx *sql.Tx, n int, it *item) (uint64, error) {
	b.commitMu.Lock()
	defer b.commitMu.Unlock()
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return b.changed(n, it), nil
}

// changed counts a change to task n that was just committed, with the
// task as it left it, and returns its generation.
func (b *Board) changed(n int, it *item) uint64 {
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	b.w.gen++
	if b.w.dirty == nil {
		b.w.dirty = map[int]*item{}
	}
	b.w.dirty[n] = it
	return b.w.gen
}

// takeDirty is called by a sync before it reads the database: it returns
// the changes the sync will include.
func (b *Board) takeDirty() (uint64, map[int]*item) {
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	d := b.w.dirty
	b.w.dirty = nil
	return b.w.gen, d
}

// finish records what a sync that included the changes up to gen did.
func (b *Board) finish(gen uint64, err error) {
	if err != nil && errors.Is(err, ErrConflict) {
		err = nil // other tasks' conflicts are not these changes'
	}
	if err != nil {
		err = unwritten(b.path, err)
	}
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	if gen >= b.w.doneGen {
		b.w.doneGen, b.w.doneErr = gen, err
	}
}

// schedule arranges a background sync within the coalescing delay, unless
// one is already scheduled: it saves the base of the last writes, or
// writes what an earlier write could not.
func (b *Board) schedule() {
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	if b.w.timer != nil || b.w.closed {
		return
	}
	b.w.running.Add(1)
	b.w.timer = time.AfterFunc(b.coalesce, func() {
		defer b.w.running.Done()
		b.w.mu.Lock()
		b.w.timer = nil // a change from now on schedules the next one
		b.w.mu.Unlock()
		b.background(context.Background(), false)
	})
}

// written returns once the file holds the change of generation gen, or
// with the warning of a change that stands on the board but is not in the
// file yet.
func (b *Board) written(ctx context.Context, gen uint64) error {
	if b.coalesce <= 0 {
		_, err := b.sync(ctx, nil, nil)
		if err == nil || errors.Is(err, ErrConflict) {
			return nil // other tasks' conflicts are not this change's
		}
		return unwritten(b.path, err)
	}
	return b.writeThrough(ctx, gen)
}

// writeThrough writes the file unless a sync that started after the
// change of generation gen already did: of the callers waiting here, the
// first to get the lock writes every change made so far, and the others
// find their change written and return at once.
func (b *Board) writeThrough(ctx context.Context, gen uint64) error {
	defer b.schedule()
	unlock, err := b.lock(ctx)
	if err != nil {
		return unwritten(b.path, err) // the background sync writes it
	}
	defer unlock()
	b.w.mu.Lock()
	done, doneErr := b.w.doneGen >= gen, b.w.doneErr
	b.w.mu.Unlock()
	if done {
		return doneErr
	}
	_, err = b.syncLocked(ctx, nil, nil, true)
	if err == nil || errors.Is(err, ErrConflict) {
		return nil
	}
	return unwritten(b.path, err)
}

// background is the background sync: when the file is still the one this
// Board wrote last, it saves the sync base of the writes made since the
// last save; otherwise it runs a whole sync, which merges a hand edit and
// writes what could not be written before. Unless now, the base waits
// for the changes to pause.
func (b *Board) background(ctx context.Context, now bool) {
	unlock, err := b.lock(ctx)
	if err != nil {
		return
	}
	defer unlock()
	if c := b.cache; c != nil && b.statSig(ctx) == c.sig {
		if !c.unsaved {
			return
		}
		if !now && !c.saveDue(b.coalesce) {
			b.schedule() // changes are still coming: save after them
			return
		}
		if err := b.saveCache(ctx); err == nil {
			return
		}
	}
	b.syncLocked(ctx, nil, nil, false) //nolint:errcheck // recorded by finish
}

// Flush writes pending changes to the file now.
func (b *Board) Flush(ctx context.Context) error {
	b.w.mu.Lock()
	if b.w.timer != nil && b.w.timer.Stop() {
		b.w.timer = nil
		b.w.running.Done()
	}
	b.w.mu.Unlock()
	b.w.running.Wait()
	_, err := b.sync(ctx, nil, nil)
	if errors.Is(err, ErrConflict) {
		return nil
	}
	return err
}

// Close writes what is pending and stops the background writer. The
// database is not closed: it is the caller's.
func (b *Board) Close(ctx context.Context) error {
	b.w.mu.Lock()
	closed := b.w.closed
	b.w.closed = true
	b.w.mu.Unlock()
	if closed {
		return nil
	}
	var err error
	if b.coalesce > 0 {
		err = b.Flush(ctx)
	}
	if b.lockFD >= 0 {
		unix.Close(b.lockFD)
		b.lockFD = -1
	}
	if cerr := b.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// setWritten remembers the signature of the file this Board just wrote,
// so that its own write is not taken for a hand edit before the database
// says so.
func (b *Board) setWritten(sig string) {
	b.w.mu.Lock()
	b.w.written = sig
	b.w.mu.Unlock()
}

func (b *Board) wrote(sig string) bool {
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	return sig != "" && sig == b.w.written
}

// openLock opens the lock file next to the database's file (-1 for a
// database in memory). It lives in the data directory, which the jails do
// not see.
func openLock(ctx context.Context, db *sql.DB) (int, error) {
	if sqlschema.DialectOf(db) == sqlschema.Postgres {
		return -1, nil // an advisory lock instead (lockShared)
	}
	rows, err := db.QueryContext(ctx, `PRAGMA database_list`)
	if err != nil {
		return -1, fmt.Errorf("find database file: %w", err)
	}
	defer rows.Close()
	var file string
	for rows.Next() {
		var seq int
		var name, f string
		if err := rows.Scan(&seq, &name, &f); err != nil {
			return -1, fmt.Errorf("find database file: %w", err)
		}
		if name == "main" {
			file = f
		}
	}
	if err := rows.Err(); err != nil {
		return -1, fmt.Errorf("find database file: %w", err)
	}
	if file == "" {
		return -1, nil
	}
	fd, err := unix.Open(file+"-tasks.lock", unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return -1, fmt.Errorf("open task board lock: %w", err)
	}
	return fd, nil
}

// lock serializes syncs of this Board (mu) and of every Board on the same
// database (an flock, which a killed process drops with its descriptors;
// on PostgreSQL an advisory lock, which a dead replica's session drops).
func (b *Board) lock(ctx context.Context) (func(), error) {
	b.mu.Lock()
	if b.pg {
		unlock, err := b.lockShared(ctx)
		if err != nil {
			b.mu.Unlock()
			return nil, err
		}
		return func() { unlock(); b.mu.Unlock() }, nil
	}
	if b.lockFD < 0 {
		return b.mu.Unlock, nil
	}
	for {
		err := unix.Flock(b.lockFD, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() {
				unix.Flock(b.lockFD, unix.LOCK_UN) //nolint:errcheck // closing would drop it too
				b.mu.Unlock()
			}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			b.mu.Unlock()
			return nil, fmt.Errorf("lock task board: %w", err)
		}
		select {
		case <-ctx.Done():
			b.mu.Unlock()
			return nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// boardLockClass is the first key of the PostgreSQL advisory locks that
// serialize the syncs of one board's file across replicas (the second is
// the board's id): what the flock next to an SQLite file does.
const boardLockClass = 0x7461736b // "task"

// lockShared takes the board's advisory lock on a connection of its own,
// held until the returned function runs.
func (b *Board) lockShared(ctx context.Context) (func(), error) {
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock task board: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(?, ?)`, boardLockClass, int32(b.id)); err != nil {
		conn.Close()
		return nil, fmt.Errorf("lock task board: %w", err)
	}
	return func() {
		//nolint:errcheck // closing the connection below would not end its session: unlock first
		conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(?, ?)`, boardLockClass, int32(b.id))
		conn.Close()
	}, nil
}
