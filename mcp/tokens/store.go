// Package tokens keeps the bearer tokens of warren's HTTP transport: a
// token is shown once when made and stored only as its SHA-256 hash, in
// the database's "auth" tables (the component keeps that name so that
// databases written before this package existed upgrade in place).
//
// It lives under mcp because the HTTP transport is its one user; it
// imports nothing of mcp, so the CLI and the console's login can use it.
package tokens

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/warrenhq/warren/sessions/sqlschema"
)

//go:embed migrations/*.sql
var authMigrations embed.FS

// Store keeps hashed bearer tokens in SQLite (component "auth").
type Store struct {
	db *sql.DB
	// Now is the clock; tests may replace it.
	Now func() time.Time

	// mu guards cache and used. Every MCP request carries the token; a
	// database read for each would cost more than a shell command, so a
	// good token is remembered for authTTL. A revocation made by another
	// process (the CLI) takes effect within authTTL; one made here, at once.
	// Last uses are written in the background every flushEvery and at
	// Close, never on the request path: a write there waited for whoever
	// held the database's write lock (6.8 s seen).
	mu      sync.Mutex
	cache   map[string]cachedToken
	used    map[string]time.Time // token id -> last use not yet written
	flusher sync.Once
	closing sync.Once
	stop    chan struct{}
	stopped chan struct{}
}

// flushEvery is how often last uses reach the database: what 'warren token
// ls' shows lags by at most this much.
const flushEvery = 30 * time.Second

// authTTL is how long a checked token is trusted without the database.
const authTTL = 5 * time.Second

type cachedToken struct {
	id, user string
	checked  time.Time
}

// Info describes a stored token; the token itself is never stored.
type Info struct {
	ID        string
	User      string
	Prefix    string
	CreatedAt time.Time
	LastUsed  time.Time // zero: never used
	Revoked   bool
}

// ErrBadToken is returned for a missing, unknown or revoked token.
var ErrBadToken = errors.New("invalid or revoked token")

// Open applies the token tables' migrations and returns the store.
func Open(ctx context.Context, db *sql.DB) (*Store, error) {
	if err := migrateAuth(ctx, db); err != nil {
		return nil, err
	}
	return &Store{db: db, Now: time.Now, cache: map[string]cachedToken{}, used: map[string]time.Time{},
		stop: make(chan struct{}), stopped: make(chan struct{})}, nil
}

func hashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// Create makes a token for user and returns it: the only time it is seen.
func (s *Store) Create(ctx context.Context, user string) (token string, info Info, err error) {
	if user == "" {
		return "", Info{}, fmt.Errorf("create token: a user name is required")
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", Info{}, fmt.Errorf("create token: %w", err)
	}
	token = "wrn_" + base64.RawURLEncoding.EncodeToString(b[:])
	var idb [4]byte
	_, _ = rand.Read(idb[:])
	info = Info{ID: "t-" + hex.EncodeToString(idb[:]), User: user, Prefix: token[:10], CreatedAt: s.Now().UTC()}
	_, err = s.db.ExecContext(ctx, `INSERT INTO auth_tokens (id, "user", hash, prefix, created_at) VALUES (?, ?, ?, ?, ?)`,
		info.ID, user, hashToken(token), info.Prefix, info.CreatedAt.UnixMilli())
	if err != nil {
		return "", Info{}, fmt.Errorf("store token: %w", err)
	}
	return token, info, nil
}

// Authenticate returns the user of token, or ErrBadToken.
func (s *Store) Authenticate(ctx context.Context, token string) (string, error) {
	if token == "" {
		return "", ErrBadToken
	}
	hash := hashToken(token)
	now := s.Now()
	s.mu.Lock()
	c, ok := s.cache[hash]
	s.mu.Unlock()
	if ok && now.Sub(c.checked) < authTTL {
		s.markUsed(c.id, now)
		return c.user, nil
	}
	var id, user string
	err := s.db.QueryRowContext(ctx, `SELECT id, "user" FROM auth_tokens WHERE hash = ? AND revoked_at IS NULL`,
		hash).Scan(&id, &user)
	if errors.Is(err, sql.ErrNoRows) {
		s.forget(hash)
		return "", ErrBadToken
	}
	if err != nil {
		return "", fmt.Errorf("check token: %w", err)
	}
	s.mu.Lock()
	s.cache[hash] = cachedToken{id: id, user: user, checked: now}
	s.mu.Unlock()
	s.markUsed(id, now)
	return user, nil
}

// markUsed notes a token's use for the next flush.
func (s *Store) markUsed(id string, at time.Time) {
	s.mu.Lock()
	s.used[id] = at
	s.mu.Unlock()
	s.flusher.Do(func() { go s.flushLoop() })
}

func (s *Store) flushLoop() {
	defer close(s.stopped)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			// On failure the uses stay pending for the next round.
			_ = s.flush(context.Background())
		case <-s.stop:
			return
		}
	}
}

// flush writes the pending last uses in one transaction; on failure they
// stay pending.
func (s *Store) flush(ctx context.Context) error {
	s.mu.Lock()
	pending := s.used
	s.used = map[string]time.Time{}
	s.mu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	err := s.writeUses(ctx, pending)
	if err != nil {
		s.mu.Lock()
		for id, at := range pending {
			if later, ok := s.used[id]; !ok || later.Before(at) {
				s.used[id] = at
			}
		}
		s.mu.Unlock()
	}
	return err
}

func (s *Store) writeUses(ctx context.Context, uses map[string]time.Time) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record token use: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	for id, at := range uses {
		if _, err := tx.ExecContext(ctx, `UPDATE auth_tokens SET last_used_at = CASE WHEN COALESCE(last_used_at, 0) > ?1 THEN last_used_at ELSE ?1 END
			WHERE id = ?2`,
			at.UTC().UnixMilli(), id); err != nil {
			return fmt.Errorf("record token use: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record token use: %w", err)
	}
	return nil
}

// Close stops the background writer and writes the last uses still
// pending. Call it before closing the database.
func (s *Store) Close() error {
	started := true
	s.flusher.Do(func() { started = false })
	if started {
		s.closing.Do(func() { close(s.stop) })
		<-s.stopped
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.flush(ctx)
}

func (s *Store) forget(hash string) {
	s.mu.Lock()
	delete(s.cache, hash)
	s.mu.Unlock()
}

// List returns every token, revoked ones included, oldest first.
func (s *Store) List(ctx context.Context) ([]Info, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, "user", prefix, created_at, COALESCE(last_used_at, 0), revoked_at IS NOT NULL
		FROM auth_tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []Info
	for rows.Next() {
		var t Info
		var created, used int64
		if err := rows.Scan(&t.ID, &t.User, &t.Prefix, &created, &used, &t.Revoked); err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		t.CreatedAt = time.UnixMilli(created).UTC()
		if used > 0 {
			t.LastUsed = time.UnixMilli(used).UTC()
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Active counts tokens that are not revoked.
func (s *Store) Active(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM auth_tokens WHERE revoked_at IS NULL`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count tokens: %w", err)
	}
	return n, nil
}

// Revoke revokes the token with id (or whose prefix is id).
func (s *Store) Revoke(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE auth_tokens SET revoked_at = ? WHERE (id = ? OR prefix = ?) AND revoked_at IS NULL`,
		s.Now().UTC().UnixMilli(), id, id)
	if err != nil {
		return fmt.Errorf("revoke token: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("no active token %q: 'warren token ls' lists them", id)
	}
	s.mu.Lock()
	clear(s.cache) // revoked tokens must not live on in the cache
	s.mu.Unlock()
	return nil
}

// migrateAuth applies the token store's embedded migrations the database
// does not have yet (see package sqlschema).
func migrateAuth(ctx context.Context, db *sql.DB) error {
	return sqlschema.Migrate(ctx, db, "auth", authMigrations, "migrations")
}
