package sessions

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/sessions/bound"
	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/sessions/sqlschema"
)

// Replicas of `warren serve` on one PostgreSQL share sessions, but a
// session's jail must run in one place at a time: two jails on one
// workspace would race each other's files and shell state. A lease in the
// database (session_leases) names the replica that drives each session's
// jail, until it expires; the holder renews its leases by a heartbeat. A
// replica that gets a call for a session another replica holds asks it to
// let go (the handover column, which the holder polls): the holder waits
// for the command that runs there, saves the shell's cwd and exports,
// stops the jail and releases; the asker then takes the lease and starts
// the jail from the saved state. A replica that died (kill -9; its jails
// die with it) stops renewing, and its leases expire.
//
// Every take bumps the lease's epoch, and a shell state is written only
// with the epoch it was made under (fenced, saveFenced): a replica that was
// frozen past its lease (SIGSTOP, a long GC pause, a partition) and wakes
// up cannot overwrite what the new holder saved. Before it drives a jail a
// replica checks that its lease is still valid by its own monotonic clock
// (no database round trip while the lease is fresh); the heartbeat kills
// the jails of leases it could not renew in time.

// LeaseConfig turns on session leases. Nil (SQLite: one process) costs
// nothing and behaves as before.
type LeaseConfig struct {
	// ReplicaID names this replica in the leases, logs and metrics; it
	// must be unique among the replicas. Empty: AutoReplicaID.
	ReplicaID string
	// TTL is how long a lease lasts unless renewed: how long a dead
	// replica's sessions wait before another takes them. Default 5s.
	TTL time.Duration
	// Wait bounds how long a call waits for another replica to hand a
	// session over. Default 3×TTL.
	Wait time.Duration
}

// Lease defaults.
const (
	defaultLeaseTTL = 5 * time.Second
	// handoverPoll is how often a holder looks for handover requests, and
	// an asker for the lease.
	handoverPoll = 100 * time.Millisecond
	maxReplicaID = 128
)

// ErrLeaseLost marks shell state that was not saved because this replica
// no longer drives the session (another one took it over).
var ErrLeaseLost = errs.New(errs.Unavailable, "another replica took the session over")

// AutoReplicaID returns hostname-pid-random: unique per process.
func AutoReplicaID() string {
	host, _ := os.Hostname()
	return bound.String(host, 64) + "-" + fmt.Sprint(os.Getpid()) + "-" + rand.Text()[:8]
}

// leaser holds this replica's leases.
type leaser struct {
	m    *Manager
	db   *sql.DB
	id   string
	ttl  time.Duration
	wait time.Duration
	now  string // SQL expression: the database's clock in milliseconds

	mu   sync.Mutex
	held map[string]*heldLease
	// strays: rows under this id that no held lease explained at the last
	// renewal (heartbeat's only).
	strays map[string]int64
	// taking: session id → *sync.Mutex serialising this replica's calls
	// that take the lease of one session.
	taking sync.Map

	acquired, handedOver, lost atomic.Int64
	stop                       context.CancelFunc
	done                       chan struct{}
}

// heldLease is a lease this replica holds.
type heldLease struct {
	epoch int64
	// valid: until then (monotonic clock) the jail may be driven without
	// asking the database.
	valid time.Time
	// releasing: a handover to another replica is under way; this
	// replica's own calls wait for it to finish.
	releasing bool
}

// leaseFence is what a shell state write must find in session_leases.
// The zero value writes without a fence (no leases).
type leaseFence struct {
	holder string
	epoch  int64
}

func newLeaser(m *Manager, db *sql.DB, cfg LeaseConfig) (*leaser, error) {
	id := cfg.ReplicaID
	if id == "" {
		id = AutoReplicaID()
	}
	if len(id) > maxReplicaID || !printable(id) {
		return nil, invalidf("replica id must be 1 to %d printable characters", maxReplicaID)
	}
	l := &leaser{m: m, db: db, id: id, ttl: cfg.TTL, wait: cfg.Wait, held: map[string]*heldLease{}, done: make(chan struct{})}
	if l.ttl <= 0 {
		l.ttl = defaultLeaseTTL
	}
	if l.wait <= 0 {
		l.wait = 3 * l.ttl
	}
	l.now = dbNowMillis(db)
	// Leases left under this id by an earlier run (an explicit
	// --replica-id reused after a crash) are given up: their jails died.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err := db.ExecContext(ctx, `UPDATE session_leases SET holder = '', expires_at = 0, handover = '' WHERE holder = ?`, id)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("release the leases of an earlier replica %s: %w", id, err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	l.stop = cancel
	go l.heartbeat(ctx)
	return l, nil
}

// dbNowMillis is the SQL expression of the database's clock in
// milliseconds: one clock for every replica's leases.
func dbNowMillis(db *sql.DB) string {
	if sqlschema.DialectOf(db) == sqlschema.Postgres {
		return `(extract(epoch from clock_timestamp()) * 1000)::bigint`
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x21 || r == 0x7f {
			return false
		}
	}
	return s != ""
}

// ReplicaID returns this replica's id, or "" without leases.
func (m *Manager) ReplicaID() string {
	if m.leases == nil {
		return ""
	}
	return m.leases.id
}

// fence returns the fence for a shell state of session id made now: the
// epoch of the lease this replica holds, or one that matches nothing.
func (l *leaser) fence(id string) leaseFence {
	if l == nil {
		return leaseFence{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.held[id]; h != nil {
		return leaseFence{holder: l.id, epoch: h.epoch}
	}
	return leaseFence{holder: l.id, epoch: -1}
}

// hold makes sure this replica holds s's lease before it drives s's jail:
// free while the lease is fresh; otherwise renewed, or taken (asking the
// holder to hand over, up to the wait), with the shell state re-read from
// the database.
func (l *leaser) hold(ctx context.Context, s *Session) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	h := l.held[s.ID]
	fresh := h != nil && !h.releasing && time.Now().Before(h.valid)
	l.mu.Unlock()
	if fresh {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.wait)
	defer cancel()
	v, _ := l.taking.LoadOrStore(s.ID, &sync.Mutex{})
	mu := v.(*sync.Mutex)
	mu.Lock()
	defer mu.Unlock()
	for {
		l.mu.Lock()
		h = l.held[s.ID]
		l.mu.Unlock()
		if h == nil || !h.releasing {
			break
		}
		// Our own handover of it is under way: let it end, then take it
		// back like anyone else.
		if err := sleepCtx(ctx, handoverPoll); err != nil {
			return errs.New(errs.Busy, fmt.Sprintf("session %s is being handed over to another replica, which asked "+
				"for it while a command ran here: retry in a moment", s.ID))
		}
	}
	if h != nil {
		if time.Now().Before(h.valid) {
			return nil // renewed meanwhile
		}
		if ok, err := l.renewOne(ctx, s.ID, h.epoch); err != nil {
			return err
		} else if ok {
			return nil
		}
		l.lose(s.ID, h.epoch, "not renewed in time")
	}
	return l.take(ctx, s)
}

// take acquires s's lease, asking its holder to hand it over.
func (l *leaser) take(ctx context.Context, s *Session) error {
	asked := false
	for {
		start := time.Now()
		var epoch int64
		err := l.db.QueryRowContext(ctx, `INSERT INTO session_leases (session_id, holder, epoch, expires_at, handover)
			VALUES (?1, ?2, 1, `+l.now+` + ?3, '')
			ON CONFLICT (session_id) DO UPDATE SET holder = excluded.holder, epoch = session_leases.epoch + 1,
				expires_at = excluded.expires_at, handover = ''
			WHERE session_leases.expires_at < `+l.now+` OR session_leases.holder = '' OR session_leases.holder = excluded.holder
			RETURNING epoch`, s.ID, l.id, l.ttl.Milliseconds()).Scan(&epoch)
		switch {
		case err == nil:
			return l.took(ctx, s, epoch, start)
		case !errors.Is(err, sql.ErrNoRows):
			if ctx.Err() != nil {
				return l.busyError(s.ID, l.holderOf(s.ID))
			}
			return fmt.Errorf("take the lease of session %s: %w", s.ID, err)
		}
		if !asked {
			if _, err := l.db.ExecContext(ctx, `UPDATE session_leases SET handover = ? WHERE session_id = ? AND holder <> ?`,
				l.id, s.ID, l.id); err != nil && ctx.Err() == nil {
				return fmt.Errorf("ask for the lease of session %s: %w", s.ID, err)
			}
			asked = true
		}
		if sleepCtx(ctx, handoverPoll) != nil {
			holder := l.holderOf(s.ID)
			// Withdraw the request: the holder need not stop for nobody.
			wctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, _ = l.db.ExecContext(wctx, `UPDATE session_leases SET handover = '' WHERE session_id = ? AND handover = ?`, s.ID, l.id)
			cancel()
			return l.busyError(s.ID, holder)
		}
	}
}

// took records a lease just taken: a shell left from an earlier lease is
// dropped, and the session's cwd and exports are read again (another
// replica may have changed them).
func (l *leaser) took(ctx context.Context, s *Session, epoch int64, start time.Time) error {
	l.mu.Lock()
	l.held[s.ID] = &heldLease{epoch: epoch, valid: start.Add(l.validFor())}
	l.mu.Unlock()
	l.m.letGo(s.ID)
	fresh, err := l.m.store.Get(ctx, s.Owner, s.ID)
	switch {
	case errors.Is(err, ErrNotFound):
		// Not stored yet: a bound session's base is recorded by its jail
		// before its row is written (Create). Its state is the new one.
	case err != nil:
		l.release(s.ID, epoch)
		return err
	default:
		s.mu.Lock()
		s.Shell = fresh.Shell
		s.shellFrom.live, s.shellFrom.version = nil, 0
		s.mu.Unlock()
	}
	l.acquired.Add(1)
	l.m.leaseLog("took the lease", s.ID, epoch)
	return nil
}

// validFor is how long after a successful renewal was sent the lease is
// trusted without asking again: less than the TTL, which the database
// counts from later.
func (l *leaser) validFor() time.Duration { return l.ttl * 4 / 5 }

// busyError says that session id is driven by another replica that did
// not hand it over in time.
func (l *leaser) busyError(id, holder string) error {
	who := "another replica"
	if holder != "" {
		who = "replica " + holder
	}
	return errs.New(errs.Busy, fmt.Sprintf("session %s is driven by %s, which did not hand it over within %s "+
		"(a command still runs there): retry in a moment, or send the session's calls to that replica", id, who, l.wait))
}

// holderOf returns the replica that holds session id's lease now ("" if
// unknown).
func (l *leaser) holderOf(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var holder string
	_ = l.db.QueryRowContext(ctx, `SELECT holder FROM session_leases WHERE session_id = ?`, id).Scan(&holder)
	return holder
}

// renewOne renews one lease this replica holds under epoch.
func (l *leaser) renewOne(ctx context.Context, id string, epoch int64) (bool, error) {
	start := time.Now()
	res, err := l.db.ExecContext(ctx, `UPDATE session_leases SET expires_at = `+l.now+` + ? WHERE session_id = ? AND holder = ? AND epoch = ?`,
		l.ttl.Milliseconds(), id, l.id, epoch)
	if err != nil {
		return false, fmt.Errorf("renew the lease of session %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return false, nil
	}
	l.mu.Lock()
	if h := l.held[id]; h != nil && h.epoch == epoch {
		h.valid = start.Add(l.validFor())
	}
	l.mu.Unlock()
	return true, nil
}

// lose forgets a lease this replica no longer holds and kills its jail at
// once: another replica may drive the session now.
func (l *leaser) lose(id string, epoch int64, why string) {
	l.mu.Lock()
	h := l.held[id]
	if h == nil || h.epoch != epoch {
		l.mu.Unlock()
		return
	}
	delete(l.held, id)
	l.mu.Unlock()
	l.lost.Add(1)
	l.m.letGo(id)
	l.m.leaseLog("lost the lease ("+why+"): its jail is stopped", id, epoch)
}

// release gives a lease up in the database (the row stays, with its
// epoch) and forgets it.
func (l *leaser) release(id string, epoch int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = l.db.ExecContext(ctx, `UPDATE session_leases SET holder = '', expires_at = 0, handover = ''
		WHERE session_id = ? AND holder = ? AND epoch = ?`, id, l.id, epoch)
	l.mu.Lock()
	if h := l.held[id]; h != nil && h.epoch == epoch {
		delete(l.held, id)
	}
	l.mu.Unlock()
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// saveFenced writes a shell state only if the lease it was made under is
// still the session's: it reports false when another replica took over.
func saveFenced(ctx context.Context, ex execer, at time.Time, id string, state ShellState, f leaseFence) (bool, error) {
	b, err := json.Marshal(state)
	if err != nil {
		return false, fmt.Errorf("encode shell state: %w", err)
	}
	now := at.UTC().UnixMilli()
	res, err := ex.ExecContext(ctx, `UPDATE sessions SET shell_state = ?, updated_at = ?, last_used_at = ? WHERE id = ?
		AND EXISTS (SELECT 1 FROM session_leases WHERE session_id = ? AND holder = ? AND epoch = ?)`,
		string(b), now, now, id, id, f.holder, f.epoch)
	if err != nil {
		return false, fmt.Errorf("save shell state: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
