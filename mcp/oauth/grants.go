package oauth

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/warrenhq/warren/sessions/sqlschema"
)

// Grant is one approval: the tokens issued from one authorization code
// and their refreshes (a family).
type Grant struct {
	ID         string // the family; 'warren oauth revoke' takes it or a prefix
	User       string
	ClientID   string
	ClientName string
	Created    time.Time // when the person approved
	Refreshed  time.Time // the newest token
	Active     bool      // a live refresh token remains
}

// minGrantPrefix is the shortest prefix 'warren oauth revoke' accepts.
const minGrantPrefix = 6

// ListGrants returns the grants that still hold a token that has not
// expired, newest first, for the operator (the CLI opens the database
// without a running server).
func ListGrants(ctx context.Context, db *sql.DB, now time.Time) ([]Grant, error) {
	if err := sqlschema.Migrate(ctx, db, "oauth", migrations, "migrations"); err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, `SELECT family, "user", client_id, MIN(created_at), MAX(created_at),
		SUM(CASE WHEN kind = 'refresh' AND used_at IS NULL AND revoked_at IS NULL AND expires_at > ? THEN 1 ELSE 0 END)
		FROM oauth_tokens GROUP BY family, "user", client_id HAVING MAX(expires_at) > ?`, now.UnixMilli(), now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	defer rows.Close()
	var out []Grant
	for rows.Next() {
		var g Grant
		var created, refreshed, live int64
		if err := rows.Scan(&g.ID, &g.User, &g.ClientID, &created, &refreshed, &live); err != nil {
			return nil, fmt.Errorf("list grants: %w", err)
		}
		g.Created, g.Refreshed, g.Active = time.UnixMilli(created).UTC(), time.UnixMilli(refreshed).UTC(), live > 0
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	for i := range out {
		var meta string
		if db.QueryRowContext(ctx, `SELECT metadata FROM oauth_clients WHERE id = ?`, out[i].ClientID).Scan(&meta) == nil {
			var c Client
			if json.Unmarshal([]byte(meta), &c) == nil {
				out[i].ClientName = c.Name
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// RevokeGrant revokes every token of the grant with id (or a prefix of at
// least 6 characters that names one grant). A running server notices
// within 5 seconds (it trusts a checked access token that long).
func RevokeGrant(ctx context.Context, db *sql.DB, id string, now time.Time) error {
	if err := sqlschema.Migrate(ctx, db, "oauth", migrations, "migrations"); err != nil {
		return err
	}
	if len(id) < minGrantPrefix {
		return fmt.Errorf("grant %q: give at least %d characters of its id ('warren oauth ls' lists them)", id, minGrantPrefix)
	}
	var families []string
	rows, err := db.QueryContext(ctx, `SELECT DISTINCT family FROM oauth_tokens WHERE substr(family, 1, ?) = ?`, len(id), id)
	if err != nil {
		return fmt.Errorf("revoke grant: %w", err)
	}
	for rows.Next() {
		var f string
		if err := rows.Scan(&f); err != nil {
			rows.Close()
			return fmt.Errorf("revoke grant: %w", err)
		}
		families = append(families, f)
	}
	rows.Close()
	switch len(families) {
	case 0:
		return fmt.Errorf("no grant %q: 'warren oauth ls' lists them", id)
	case 1:
	default:
		return fmt.Errorf("%q names %d grants: give more of the id", id, len(families))
	}
	if _, err := db.ExecContext(ctx, `UPDATE oauth_tokens SET revoked_at = ? WHERE family = ? AND revoked_at IS NULL`,
		now.UnixMilli(), families[0]); err != nil {
		return fmt.Errorf("revoke grant: %w", err)
	}
	return nil
}

// Migrate applies the authorization server's migrations to db (warren
// migrate brings a target database to every store's schema).
func Migrate(ctx context.Context, db *sql.DB) error {
	return sqlschema.Migrate(ctx, db, "oauth", migrations, "migrations")
}
