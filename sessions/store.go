// Package sessions keeps workspace sessions: who owns them, where their
// workspace lives, their lifecycle (active, paused, archived, deleted) and
// the shell state that must survive a restart. The Manager maps a (user,
// session id) pair to a live jailed shell, starting shells lazily so that
// listing sessions never starts anything.
package sessions

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/sessions/workspace"
)

// ErrNotFound is returned for a session that does not exist or belongs to
// another user: the two are indistinguishable so that ids do not leak.
var ErrNotFound = errs.New(errs.NotFound, "session not found")

// Mode says how a session's workspace was made.
type Mode string

// Workspace modes.
const (
	// ModeEmpty is a fresh directory under the data dir.
	ModeEmpty Mode = "empty"
	// ModeBind is an existing host directory, edited in place.
	ModeBind Mode = "bind"
	// ModeClone is a clone of a git URL or local repository under the data dir.
	ModeClone Mode = "clone"
)

// State is a session's lifecycle state.
type State string

// Lifecycle states: active ⇄ paused; active or paused → archived; any → deleted.
const (
	// StateActive sessions run commands; their shell may be running or not.
	StateActive State = "active"
	// StatePaused sessions have their shell stopped and a snapshot taken;
	// they refuse commands and writes until resumed.
	StatePaused State = "paused"
	// StateArchived sessions are read-only and kept for the record.
	StateArchived State = "archived"
	// StateDeleted sessions have lost their workspace; their rows go next
	// (purge.go), so a row stays in this state only while that is retried.
	StateDeleted State = "deleted"
)

// Meta is what a session is, set when it is created.
type Meta struct {
	ID         string
	Owner      string
	Name       string
	Mode       Mode
	Source     string
	Ref        string
	BaseCommit string // the commit a clone checked out
	CreatedAt  time.Time
}

// Session is the stored metadata of one workspace session. It never holds
// a live shell: see Manager.
type Session struct {
	Meta
	Workspace  string // host directory bound at /workspace
	DefaultKey string // non-empty for a user's default session of a binding

	// mu guards the mutable fields below once the session is shared by
	// concurrent calls.
	mu    sync.Mutex
	state State
	Shell ShellState // the saved shell state
	// shellFrom is the live shell and StateVersion that Shell was last
	// taken from (queueState): the same pair means nothing to copy or
	// compare.
	shellFrom struct {
		live    *live
		version uint64
	}
	UpdatedAt time.Time
	EndedAt   time.Time
	checked   time.Time // when state was last re-read from the database
	network   Network   // the network policy; see network.go
	// guarded is the stamp of the workspace directory that last passed
	// the checks of every use (guard.go).
	guarded workspace.Stamp
}

// State returns the session's lifecycle state.
func (s *Session) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

func (s *Session) setState(st State, at time.Time) {
	s.mu.Lock()
	s.state, s.UpdatedAt = st, at
	if st == StateArchived || st == StateDeleted {
		s.EndedAt = at
	}
	s.mu.Unlock()
}

// Info is a copy of a session's metadata, safe to hand out.
type Info struct {
	Meta
	State     State
	Cwd       string
	UpdatedAt time.Time
	EndedAt   time.Time
	Network   Network
}

// Info returns a copy of s's metadata.
func (s *Session) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	cwd := s.Shell.Cwd
	if cwd == "" {
		cwd = sandbox.MountPoint
	}
	net := s.network
	if net.Mode == "" {
		net.Mode = NetNone
	}
	return Info{Meta: s.Meta, State: s.state, Cwd: cwd, UpdatedAt: s.UpdatedAt, EndedAt: s.EndedAt, Network: net}
}

// Store reads and writes sessions in SQLite.
type Store struct {
	db *sql.DB
	// Now is the clock; tests may replace it.
	Now func() time.Time
}

// NewStore applies the package's migrations and returns a Store.
func NewStore(ctx context.Context, db *sql.DB) (*Store, error) {
	if err := Migrate(ctx, db); err != nil {
		return nil, err
	}
	return &Store{db: db, Now: time.Now}, nil
}

// NewID returns a fresh session id: "s-" and 16 hex digits.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "s-" + hex.EncodeToString(b[:])
}

const columns = `id, owner, name, mode, source, ref, base_commit, workspace, state, COALESCE(default_key, ''),
	shell_state, created_at, updated_at, ended_at, network`

// Create inserts s, filling its timestamps and state.
func (st *Store) Create(ctx context.Context, s *Session) error {
	ctx, span := tracer.Start(ctx, "sessions.db_create")
	defer span.End()
	now := st.Now().UTC()
	s.CreatedAt, s.UpdatedAt = now, now
	if s.state == "" {
		s.state = StateActive
	}
	shell, err := json.Marshal(s.Shell)
	if err != nil {
		return fmt.Errorf("encode shell state: %w", err)
	}
	var key any
	if s.DefaultKey != "" {
		key = s.DefaultKey
	}
	_, err = st.db.ExecContext(ctx, `INSERT INTO sessions (id, owner, name, mode, source, ref, base_commit, workspace,
		state, default_key, shell_state, created_at, updated_at, last_used_at, network)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.Owner, s.Name, string(s.Mode), s.Source, s.Ref, s.BaseCommit, s.Workspace, string(s.state), key,
		string(shell), now.UnixMilli(), now.UnixMilli(), now.UnixMilli(), encodeNetwork(s.network))
	if err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	return nil
}

// Get returns owner's session id (in any state), or ErrNotFound.
func (st *Store) Get(ctx context.Context, owner, id string) (*Session, error) {
	return st.one(ctx, `SELECT `+columns+` FROM sessions WHERE owner = ? AND id = ?`, owner, id)
}

// GetDefault returns owner's default session for key, or ErrNotFound.
// Owner returns the user a session belongs to, deleted or not.
func (st *Store) Owner(ctx context.Context, id string) (string, error) {
	var owner string
	err := st.db.QueryRowContext(ctx, `SELECT owner FROM sessions WHERE id = ?`, id).Scan(&owner)
	if err != nil {
		return "", fmt.Errorf("owner of session %s: %w", id, err)
	}
	return owner, nil
}

func (st *Store) GetDefault(ctx context.Context, owner, key string) (*Session, error) {
	return st.one(ctx, `SELECT `+columns+` FROM sessions WHERE owner = ? AND default_key = ?`, owner, key)
}

// List returns owner's sessions, oldest first; deleted ones (whose rows
// could not be removed yet) only with withDeleted.
func (st *Store) List(ctx context.Context, owner string, withDeleted bool) ([]*Session, error) {
	q := `SELECT ` + columns + ` FROM sessions WHERE owner = ?`
	if !withDeleted {
		q += ` AND state <> 'deleted'`
	}
	rows, err := st.db.QueryContext(ctx, q+` ORDER BY created_at, id`, owner)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var out []*Session
	for rows.Next() {
		s, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// Count returns how many of owner's sessions are not deleted.
func (st *Store) Count(ctx context.Context, owner string) (int, error) {
	var n int
	err := st.db.QueryRowContext(ctx, `SELECT count(*) FROM sessions WHERE owner = ? AND state <> 'deleted'`, owner).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count sessions: %w", err)
	}
	return n, nil
}

// SaveShell records the shell state of session id. The write is committed
// before it returns. The Manager writes through its saver, which retries;
// this is for callers without one (tests, tools that own the database).
func (st *Store) SaveShell(ctx context.Context, id string, state ShellState) error {
	return saveShell(ctx, st.db, st.Now(), id, state)
}

func saveShell(ctx context.Context, ex execer, at time.Time, id string, state ShellState) error {
	b, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("encode shell state: %w", err)
	}
	now := at.UTC().UnixMilli()
	_, err = ex.ExecContext(ctx, `UPDATE sessions SET shell_state = ?, updated_at = ?, last_used_at = ? WHERE id = ?`,
		string(b), now, now, id)
	if err != nil {
		return fmt.Errorf("save shell state: %w", err)
	}
	return nil
}

// Transition moves session id from one of the states in from to to, in
// one statement so that a server and the CLI racing on one database cannot
// both win. It reports whether the row changed. Archived and deleted
// sessions lose their default_key: the user's next default is a new one.
func (st *Store) Transition(ctx context.Context, id string, from []State, to State) (bool, time.Time, error) {
	ctx, span := tracer.Start(ctx, "sessions.db_transition")
	defer span.End()
	now := st.Now().UTC()
	q := `UPDATE sessions SET state = ?, updated_at = ?`
	args := []any{string(to), now.UnixMilli()}
	if to == StateArchived || to == StateDeleted {
		q += `, ended_at = ?, default_key = NULL`
		args = append(args, now.UnixMilli())
	}
	q += ` WHERE id = ? AND state IN (?` + strings.Repeat(", ?", len(from)-1) + `)`
	args = append(args, id)
	for _, f := range from {
		args = append(args, string(f))
	}
	res, err := st.db.ExecContext(ctx, q, args...)
	if err != nil {
		return false, now, fmt.Errorf("change session state: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, now, err
}

// state re-reads the lifecycle state of session id.
func (st *Store) state(ctx context.Context, id string) (State, error) {
	var s string
	err := st.db.QueryRowContext(ctx, `SELECT state FROM sessions WHERE id = ?`, id).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("read session state: %w", err)
	}
	return State(s), nil
}

// shellState returns the saved shell state.
func (s *Session) shellState() ShellState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Shell
}

func (st *Store) one(ctx context.Context, query string, args ...any) (*Session, error) {
	rows, err := st.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("get session: %w", err)
		}
		return nil, ErrNotFound
	}
	return scan(rows)
}

func scan(rows *sql.Rows) (*Session, error) {
	var s Session
	var mode, state, shell, network string
	var created, updated, ended int64
	if err := rows.Scan(&s.ID, &s.Owner, &s.Name, &mode, &s.Source, &s.Ref, &s.BaseCommit, &s.Workspace, &state,
		&s.DefaultKey, &shell, &created, &updated, &ended, &network); err != nil {
		return nil, fmt.Errorf("scan session: %w", err)
	}
	var err error
	if s.network, err = decodeNetwork(network); err != nil {
		return nil, fmt.Errorf("decode network policy of %s: %w", s.ID, err)
	}
	s.Mode, s.state = Mode(mode), State(state)
	if err := json.Unmarshal([]byte(shell), &s.Shell); err != nil {
		return nil, fmt.Errorf("decode shell state of %s: %w", s.ID, err)
	}
	s.CreatedAt, s.UpdatedAt = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	if ended > 0 {
		s.EndedAt = time.UnixMilli(ended).UTC()
	}
	return &s, nil
}
