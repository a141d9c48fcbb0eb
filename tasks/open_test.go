package tasks

import (
	"context"
	"database/sql"
	"time"

	"github.com/warrenhq/warren/sandbox"
)

// openIn opens the board of path in the workspace ws as 'serve stdio
// --workspace ws' opens it: its file reached through a runner in a jail
// of its own that binds ws.
func openIn(ctx context.Context, db *sql.DB, ws, path string, now func() time.Time) (*Board, error) {
	j, err := sandbox.NewRunnerJail(ws, sandbox.RunnerJailOptions{})
	if err != nil {
		return nil, err
	}
	file, err := RunnerFile(RunnerOptions{Conn: j.Runner, Workspace: ws, Path: path, Close: j.Close})
	if err != nil {
		j.Close()
		return nil, err
	}
	b, err := Open(ctx, db, Options{Path: path, File: file, Now: now})
	if err != nil {
		j.Close()
	}
	return b, err
}
