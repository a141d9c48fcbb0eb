package sessions

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/warrenhq/warren/sessions/errs"
)

// Shell states are written by one goroutine, the saver, which retries until
// the database takes them: a write that fails (the write lock held by
// another process past the busy timeout, a full disk) is not a state lost.
// A caller waits for its state as long as its context allows and then
// learns that it is not saved yet (NotSavedError) while the saver goes on.

// saveAttempt bounds one write: long enough for ordinary contention (a
// task board write, a checkpoint), short enough that a caller waiting for
// its state hears about trouble quickly. Each attempt waits for the write
// lock until then.
const saveAttempt = 2 * time.Second

// Retry delays after a failed write: doubling from the first to the last.
const (
	retryFirst = 200 * time.Millisecond
	retryMax   = 5 * time.Second
)

// ErrStateNotSaved marks a shell state that the server keeps and will
// retry, but that is not in the database yet: a kill -9 now would lose it.
var ErrStateNotSaved = errs.New(errs.Unavailable, "shell state not saved yet")

// NotSavedError says why a session's cwd and exports are not saved yet.
type NotSavedError struct {
	// Cause is the last write's error; nil when no write failed yet (the
	// first is still waiting for the database).
	Cause error
}

func (e *NotSavedError) Error() string {
	if errors.Is(e.Cause, ErrLeaseLost) {
		return "cwd and exports after this command were not saved: " + e.Reason() + " (this replica's lease " +
			"on the session was lost), and the session goes on there from its last saved state"
	}
	return "cwd and exports are not yet saved: " + e.Reason() + "; they will be retried until they are " +
		"(a crash of the server before then loses them)"
}

// Reason says in words why the state is not saved.
func (e *NotSavedError) Reason() string {
	switch {
	case e.Cause == nil, errors.Is(e.Cause, sqlite3.BUSY), errors.Is(e.Cause, sqlite3.INTERRUPT),
		errors.Is(e.Cause, context.DeadlineExceeded):
		return "the database is busy (another process holds its write lock)"
	case errors.Is(e.Cause, ErrLeaseLost):
		return "another replica took the session over"
	case errors.Is(e.Cause, sqlite3.FULL):
		return "the disk holding the database is full"
	}
	return "the database failed (" + e.Cause.Error() + ")"
}

// Is makes errors.Is(err, ErrStateNotSaved) true.
func (e *NotSavedError) Is(target error) bool { return target == ErrStateNotSaved }

// ErrorCode implements errs.Coder: the state is kept and retried, but the
// database cannot take it now.
func (e *NotSavedError) ErrorCode() errs.Code { return errs.Unavailable }

// Unwrap returns the cause.
func (e *NotSavedError) Unwrap() error { return e.Cause }

type queuedState struct {
	st    ShellState
	seq   uint64
	fence leaseFence // the lease it was made under (lease.go); zero: none
}

// saver writes the newest shell state of each session, in order, and
// retries failed writes.
type saver struct {
	store *Store

	// mu protects the fields below; changed is closed (and replaced) after
	// every write attempt, to wake the callers waiting for theirs.
	mu      sync.Mutex
	seq     uint64
	pending map[string]queuedState // newest state not yet taken by the writer
	queued  map[string]uint64      // newest seq queued per session
	saved   map[string]uint64      // newest seq written per session
	fenced  map[string]uint64      // newest seq refused: its lease was lost (lease.go)
	busy    bool                   // the writer holds states taken from pending
	lastErr error                  // the last write's error, nil after a success
	changed chan struct{}
	closed  bool

	kick   chan struct{}
	stop   chan struct{}
	exited chan struct{}
}

func newSaver(store *Store) *saver {
	sv := &saver{store: store, pending: map[string]queuedState{}, queued: map[string]uint64{},
		saved: map[string]uint64{}, fenced: map[string]uint64{}, changed: make(chan struct{}), kick: make(chan struct{}, 1),
		stop: make(chan struct{}), exited: make(chan struct{})}
	go sv.run()
	return sv
}

// queue hands st to the writer and returns its sequence number.
func (sv *saver) queue(id string, st ShellState) uint64 {
	return sv.queueFenced(id, st, leaseFence{})
}

// queueFenced is queue for a state that may be written only while the
// session's lease is still fence (lease.go).
func (sv *saver) queueFenced(id string, st ShellState, fence leaseFence) uint64 {
	sv.mu.Lock()
	sv.seq++
	seq := sv.seq
	sv.pending[id] = queuedState{st: st, seq: seq, fence: fence}
	sv.queued[id] = seq
	sv.mu.Unlock()
	sv.poke()
	return seq
}

func (sv *saver) poke() {
	select {
	case sv.kick <- struct{}{}:
	default:
	}
}

// wait blocks until every state queued for session id is written, or ctx
// ends (a NotSavedError).
// written reports whether every state queued for session id is written.
func (sv *saver) written(id string) bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.saved[id] >= sv.queued[id] && sv.fenced[id] != sv.queued[id]
}

func (sv *saver) wait(ctx context.Context, id string) error {
	for {
		sv.mu.Lock()
		done := sv.saved[id] >= sv.queued[id]
		lost := sv.fenced[id] == sv.queued[id] && sv.queued[id] > 0
		ch, cause := sv.changed, sv.lastErr
		sv.mu.Unlock()
		if done && lost {
			return &NotSavedError{Cause: ErrLeaseLost}
		}
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return &NotSavedError{Cause: cause}
		}
	}
}

// flush waits until nothing is left to write, or ctx ends.
func (sv *saver) flush(ctx context.Context) error {
	for {
		sv.mu.Lock()
		done := len(sv.pending) == 0 && !sv.busy
		ch, cause := sv.changed, sv.lastErr
		sv.mu.Unlock()
		if done {
			return nil
		}
		sv.poke() // retry now rather than after the backoff
		select {
		case <-ch:
		case <-ctx.Done():
			return &NotSavedError{Cause: cause}
		}
	}
}

// close stops the writer once ctx ends or nothing is left to write.
func (sv *saver) close(ctx context.Context) error {
	err := sv.flush(ctx)
	sv.mu.Lock()
	if !sv.closed {
		sv.closed = true
		close(sv.stop)
	}
	sv.mu.Unlock()
	<-sv.exited
	return err
}

func (sv *saver) run() {
	defer close(sv.exited)
	delay := retryFirst
	for {
		select {
		case <-sv.stop:
			return
		case <-sv.kick:
		}
		for {
			sv.mu.Lock()
			batch := sv.pending
			sv.pending = map[string]queuedState{}
			sv.busy = len(batch) > 0
			sv.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			ctx, cancel := context.WithTimeout(context.Background(), saveAttempt)
			fenced, err := sv.store.saveShells(ctx, batch)
			cancel()
			sv.done(batch, fenced, err)
			if err == nil {
				delay = retryFirst
				continue
			}
			t := time.NewTimer(delay)
			select {
			case <-sv.stop:
				t.Stop()
				return
			case <-sv.kick:
			case <-t.C:
			}
			t.Stop()
			delay = min(2*delay, retryMax)
		}
	}
}

// done records the outcome of writing batch: a failed state goes back in
// the queue unless a newer one of its session arrived meanwhile.
func (sv *saver) done(batch map[string]queuedState, fenced map[string]bool, err error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	sv.lastErr = err
	for id, q := range batch {
		switch {
		case err == nil:
			sv.saved[id] = max(sv.saved[id], q.seq)
			if fenced[id] {
				sv.fenced[id] = q.seq // kept from the database for good: retrying cannot help
			}
		case sv.pending[id].seq < q.seq:
			sv.pending[id] = q
		}
	}
	sv.busy = false
	close(sv.changed)
	sv.changed = make(chan struct{})
}

// saveShells writes the shell states of several sessions in one
// transaction. A state whose lease was lost is not written: fenced names
// those.
func (st *Store) saveShells(ctx context.Context, batch map[string]queuedState) (fenced map[string]bool, err error) {
	tx, err := st.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("save shell state: %w", err)
	}
	defer tx.Rollback()
	for id, q := range batch {
		if q.fence == (leaseFence{}) {
			if err := saveShell(ctx, tx, st.Now(), id, q.st); err != nil {
				return nil, err
			}
			continue
		}
		ok, err := saveFenced(ctx, tx, st.Now(), id, q.st, q.fence)
		if err != nil {
			return nil, err
		}
		if !ok {
			if fenced == nil {
				fenced = map[string]bool{}
			}
			fenced[id] = true
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("save shell state: %w", err)
	}
	return fenced, nil
}

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}
