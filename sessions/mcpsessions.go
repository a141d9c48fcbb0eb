package sessions

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// MCPSessions keeps the MCP sessions of the 2025 protocol revisions (the
// Mcp-Session-Id a client got at initialize) in the database, so that a
// client whose next request reaches another replica continues its
// session there. Only what the ownership check and the client's identity
// need is kept: the SHA-256 of the id (the id itself lets its holder
// continue the session: it is not stored), its owner, what the client
// said of itself (bounded), and when it expires unless used. Rows are
// bounded per owner and swept when expired.
type MCPSessions struct {
	db  *sql.DB
	ttl time.Duration
	// Now is the clock; tests may replace it.
	Now func() time.Time
}

// MaxMCPSessionsPerOwner bounds the MCP sessions one user keeps: opening
// one more forgets their oldest.
const MaxMCPSessionsPerOwner = 1000

// NewMCPSessions returns the shared MCP sessions of db; a session unused
// for ttl expires. The table is this package's (migration 004).
func NewMCPSessions(db *sql.DB, ttl time.Duration) *MCPSessions {
	return &MCPSessions{db: db, ttl: ttl, Now: time.Now}
}

func mcpIDHash(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

// Put records MCP session id of owner, forgetting expired sessions and
// owner's oldest beyond the cap.
func (ms *MCPSessions) Put(ctx context.Context, id, owner string) error {
	now := ms.Now().UnixMilli()
	tx, err := ms.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record MCP session: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM mcp_sessions WHERE expires_at < ?`, now); err != nil {
		return fmt.Errorf("record MCP session: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO mcp_sessions (id_hash, owner, created_at, expires_at) VALUES (?, ?, ?, ?)`,
		mcpIDHash(id), owner, now, now+ms.ttl.Milliseconds()); err != nil {
		return fmt.Errorf("record MCP session: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM mcp_sessions WHERE owner = ? AND id_hash NOT IN
		(SELECT id_hash FROM mcp_sessions WHERE owner = ? ORDER BY created_at DESC, id_hash LIMIT ?)`,
		owner, owner, MaxMCPSessionsPerOwner); err != nil {
		return fmt.Errorf("record MCP session: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record MCP session: %w", err)
	}
	return nil
}

// Owner returns the owner of live MCP session id and what its client
// said of itself (SetClient), or "" when it is unknown or expired. A
// session found is kept alive for another ttl (one write a minute at
// most).
func (ms *MCPSessions) Owner(ctx context.Context, id string) (owner, client string, err error) {
	now := ms.Now().UnixMilli()
	h := mcpIDHash(id)
	var expires int64
	err = ms.db.QueryRowContext(ctx, `SELECT owner, client, expires_at FROM mcp_sessions WHERE id_hash = ?`, h).Scan(&owner, &client, &expires)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", "", nil
	case err != nil:
		return "", "", fmt.Errorf("look up MCP session: %w", err)
	case expires < now:
		return "", "", nil
	}
	if next := now + ms.ttl.Milliseconds(); next-expires > time.Minute.Milliseconds() {
		if _, err := ms.db.ExecContext(ctx, `UPDATE mcp_sessions SET expires_at = ? WHERE id_hash = ?`, next, h); err != nil {
			return "", "", fmt.Errorf("keep MCP session alive: %w", err)
		}
	}
	return owner, client, nil
}

// MaxMCPClient bounds what is kept of a client's description.
const MaxMCPClient = 8 << 10

// SetClient records what the client of MCP session id said of itself at
// initialize (at most MaxMCPClient bytes).
func (ms *MCPSessions) SetClient(ctx context.Context, id, client string) error {
	if len(client) > MaxMCPClient {
		return invalidf("an MCP client's description is %d bytes, at most %d are kept", len(client), MaxMCPClient)
	}
	if _, err := ms.db.ExecContext(ctx, `UPDATE mcp_sessions SET client = ? WHERE id_hash = ?`, client, mcpIDHash(id)); err != nil {
		return fmt.Errorf("record MCP client: %w", err)
	}
	return nil
}

// Delete forgets MCP session id (the client ended it).
func (ms *MCPSessions) Delete(ctx context.Context, id string) error {
	if _, err := ms.db.ExecContext(ctx, `DELETE FROM mcp_sessions WHERE id_hash = ?`, mcpIDHash(id)); err != nil {
		return fmt.Errorf("end MCP session: %w", err)
	}
	return nil
}
