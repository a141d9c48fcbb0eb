package tasks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// writer is the background writer of a Board with Options.Coalesce: a
// change marks the board, and one sync a little later writes every change
// made meanwhile. The database is the source of truth, so a crash before
// that sync loses nothing: the next sync (the next Open) writes it.
type writer struct {
	mu      sync.Mutex
	timer   *time.Timer // set while a sync is scheduled
	running sync.WaitGroup
	closed  bool
	lastErr error     // what the last background sync could not do
	written string    // signature of the file this Board wrote last
	cleaned time.Time // when cleanTemps last ran
}

// schedule arranges a sync within the coalescing delay, unless one is
// already scheduled.
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
		b.w.timer = nil // a change from now on schedules the next sync
		b.w.mu.Unlock()
		_, err := b.sync(context.Background(), nil, nil)
		if errors.Is(err, ErrConflict) {
			err = nil // reported to whoever touches those tasks
		}
		b.w.mu.Lock()
		b.w.lastErr = err
		b.w.mu.Unlock()
	})
}

// written returns the warning for a change that stands on the board: the
// sync that writes it ran now (no coalescing) or is scheduled.
func (b *Board) written(ctx context.Context) error {
	if b.coalesce <= 0 {
		_, err := b.sync(ctx, nil, nil)
		if err == nil || errors.Is(err, ErrConflict) {
			return nil // other tasks' conflicts are not this change's
		}
		return unwritten(b.path, err)
	}
	b.schedule()
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	if b.w.lastErr != nil {
		return unwritten(b.path, b.w.lastErr)
	}
	return nil
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

// cleanTemps removes stale temporary files, at most once a minute.
func (b *Board) cleanTemps(d *fileDir) {
	now := time.Now()
	b.w.mu.Lock()
	due := now.Sub(b.w.cleaned) >= staleTemp
	if due {
		b.w.cleaned = now
	}
	b.w.mu.Unlock()
	if due {
		b.loc.cleanTemps(d, now)
	}
}

// openLock opens the lock file next to the database's file (-1 for a
// database in memory). It lives in the data directory, which the jails do
// not see.
func openLock(ctx context.Context, db *sql.DB) (int, error) {
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
// database (an flock, which a killed process drops with its descriptors).
func (b *Board) lock(ctx context.Context) (func(), error) {
	b.mu.Lock()
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
