package tasks

import (
	"context"
	"database/sql"
	"time"
)

// openIn opens the board of path from the workspace ws.
func openIn(ctx context.Context, db *sql.DB, ws, path string, now func() time.Time) (*Board, error) {
	return Open(ctx, db, Options{Path: path, Root: ws, Now: now})
}
