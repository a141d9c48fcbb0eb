// Package sessions keeps workspace sessions: who owns them, where their
// workspace lives, and the shell state that must survive a restart. The
// Manager maps a (user, session id) pair to a live jailed shell, starting
// shells lazily so that listing sessions never starts anything.
package sessions

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/warrenhq/warren/sandbox"
)

// ErrNotFound is returned for a session that does not exist or belongs to
// another user: the two are indistinguishable so that ids do not leak.
var ErrNotFound = errors.New("session not found")

// Mode says how a session's workspace was made.
type Mode string

// Workspace modes. Issue #4 adds clone.
const (
	// ModeEmpty is a fresh directory under the data dir.
	ModeEmpty Mode = "empty"
	// ModeBind is an existing host directory, edited in place.
	ModeBind Mode = "bind"
)

// State is a session's lifecycle state.
type State string

// StateActive is the only state this package produces for now; paused,
// archived and deleted arrive with the session lifecycle.
const StateActive State = "active"

// Session is the stored metadata of one workspace session. It never holds
// a live shell: see Manager.
type Session struct {
	ID         string
	Owner      string
	Name       string
	Mode       Mode
	Source     string
	Workspace  string // host directory bound at /workspace
	State      State
	DefaultKey string // non-empty for a user's default session of a binding
	// Shell is the saved shell state; mu guards it once the session is
	// shared by concurrent calls.
	Shell     sandbox.State
	mu        sync.Mutex
	CreatedAt time.Time
	UpdatedAt time.Time
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

const columns = `id, owner, name, mode, source, workspace, state, COALESCE(default_key, ''), shell_state, created_at, updated_at`

// Create inserts s, filling its timestamps and state.
func (st *Store) Create(ctx context.Context, s *Session) error {
	now := st.Now().UTC()
	s.CreatedAt, s.UpdatedAt = now, now
	if s.State == "" {
		s.State = StateActive
	}
	shell, err := json.Marshal(s.Shell)
	if err != nil {
		return fmt.Errorf("encode shell state: %w", err)
	}
	var key any
	if s.DefaultKey != "" {
		key = s.DefaultKey
	}
	_, err = st.db.ExecContext(ctx, `INSERT INTO sessions (id, owner, name, mode, source, workspace, state, default_key, shell_state, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.Owner, s.Name, string(s.Mode), s.Source, s.Workspace, string(s.State), key, string(shell),
		now.UnixMilli(), now.UnixMilli())
	if err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	return nil
}

// Get returns owner's session id, or ErrNotFound.
func (st *Store) Get(ctx context.Context, owner, id string) (*Session, error) {
	return st.one(ctx, `SELECT `+columns+` FROM sessions WHERE owner = ? AND id = ?`, owner, id)
}

// GetDefault returns owner's default session for key, or ErrNotFound.
func (st *Store) GetDefault(ctx context.Context, owner, key string) (*Session, error) {
	return st.one(ctx, `SELECT `+columns+` FROM sessions WHERE owner = ? AND default_key = ?`, owner, key)
}

// List returns owner's sessions, oldest first.
func (st *Store) List(ctx context.Context, owner string) ([]*Session, error) {
	rows, err := st.db.QueryContext(ctx, `SELECT `+columns+` FROM sessions WHERE owner = ? ORDER BY created_at, id`, owner)
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

// SaveShell records the shell state of session id.
func (st *Store) SaveShell(ctx context.Context, id string, state sandbox.State) error {
	b, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("encode shell state: %w", err)
	}
	_, err = st.db.ExecContext(ctx, `UPDATE sessions SET shell_state = ?, updated_at = ? WHERE id = ?`,
		string(b), st.Now().UTC().UnixMilli(), id)
	if err != nil {
		return fmt.Errorf("save shell state: %w", err)
	}
	return nil
}

// shellState returns the saved shell state.
func (s *Session) shellState() sandbox.State {
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
	var mode, state, shell string
	var created, updated int64
	if err := rows.Scan(&s.ID, &s.Owner, &s.Name, &mode, &s.Source, &s.Workspace, &state, &s.DefaultKey,
		&shell, &created, &updated); err != nil {
		return nil, fmt.Errorf("scan session: %w", err)
	}
	s.Mode, s.State = Mode(mode), State(state)
	if err := json.Unmarshal([]byte(shell), &s.Shell); err != nil {
		return nil, fmt.Errorf("decode shell state of %s: %w", s.ID, err)
	}
	s.CreatedAt, s.UpdatedAt = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	return &s, nil
}
