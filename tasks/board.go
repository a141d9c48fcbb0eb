package tasks

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/warrenhq/warren/sessions/sqlschema"
)

// component is this package's key in the schema_versions table shared by
// every store.
const component = "tasks"

// DefaultLease is how long a claim lasts when Claim is given no lease.
const DefaultLease = 30 * time.Minute

//go:embed migrations/*.sql
var migrationFS embed.FS

// writeTx starts transactions with BEGIN IMMEDIATE whatever the DSN says:
// a read-merge-write cycle must hold the write lock from its first read, or
// two processes could merge the same file twice.
var writeTx = &sql.TxOptions{Isolation: sql.LevelSerializable}

// Options configures a Board.
type Options struct {
	// Path is the TASKS.md file. It need not exist yet: it is created on
	// the first change.
	Path string
	// Root is the directory, chosen by the operator, that holds Path: the
	// workspace for <workspace>/docs/TASKS.md. Every name of Path below it
	// may be the jail's, so it is opened without following links, and
	// missing directories are created (owned like Root). Empty: Path's
	// own directory.
	Root string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Lease is used by Claim and Renew when they are given no lease;
	// DefaultLease when zero.
	Lease time.Duration
	// Coalesce, when positive, is the server's way of writing: a change
	// still returns only once the file holds it, but changes made while a
	// write runs share the next one, the Board keeps the file it wrote
	// last in memory to rewrite only the changed tasks' lines, and saves
	// the sync base in the background, this long after the changes pause.
	// Close saves what is pending. Zero (the CLI): every change runs a
	// whole sync before it returns.
	Coalesce time.Duration
}

// Board is the task board of one TASKS.md file. It is safe for concurrent
// use, and several Boards (in one process or many) may share a database
// and a file: SQLite's write lock orders their changes (on PostgreSQL the
// advisory write lock of sqlschema), and a lock file next to the database
// (on PostgreSQL an advisory lock per board) lets one sync at a time write
// the file.
type Board struct {
	db       *sql.DB
	id       int64
	path     string
	loc      location
	now      func() time.Time
	lease    time.Duration
	coalesce time.Duration

	// mu serializes this Board's syncs; lockFD (a flock'ed file next to
	// the database, -1 for a database in memory) serializes them with
	// other Boards and processes.
	mu     sync.Mutex
	lockFD int
	pg     bool // PostgreSQL: an advisory lock instead of lockFD
	// commitMu orders the commits of changes with their record for the
	// next write (see commit).
	commitMu sync.Mutex

	w     writer
	cache *fileCache // the file this Board wrote last; under mu

	// beforeWrite, when set by tests, runs after the new file is rendered
	// and before it replaces the old one: the moment a hand edit races us.
	beforeWrite func()
	// settle is settleTime; tests that never write in place set it to 0.
	settle time.Duration
	// write replaces the file; tests swap it to make writes fail.
	write func(l location, d *fileDir, data []byte, was current) (string, error)
}

// Open applies the package's migrations to db and returns the board of
// opts.Path, registering it on first use. It does not read the file: every
// read and change does when the file changed since (see Sync). With
// opts.Coalesce, it schedules a sync, which writes what a killed process
// left unwritten and removes its temporary files.
func Open(ctx context.Context, db *sql.DB, opts Options) (*Board, error) {
	if opts.Path == "" {
		return nil, invalidf("open board: a TASKS.md path is required")
	}
	path, err := filepath.Abs(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("open board: %w", err)
	}
	root := opts.Root
	if root != "" {
		if root, err = filepath.Abs(root); err != nil {
			return nil, fmt.Errorf("open board: %w", err)
		}
	}
	loc, err := newLocation(root, path)
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, db); err != nil {
		return nil, err
	}
	b := &Board{db: db, path: path, loc: loc, now: opts.Now, lease: opts.Lease, coalesce: opts.Coalesce,
		write: location.write, lockFD: -1, settle: settleTime, pg: sqlschema.DialectOf(db) == sqlschema.Postgres}
	if b.now == nil {
		b.now = time.Now
	}
	if b.lease <= 0 {
		b.lease = DefaultLease
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO task_boards (path) VALUES (?) ON CONFLICT (path) DO NOTHING`, path); err != nil {
		return nil, fmt.Errorf("register board: %w", err)
	}
	if err := db.QueryRowContext(ctx, `SELECT id FROM task_boards WHERE path = ?`, path).Scan(&b.id); err != nil {
		return nil, fmt.Errorf("load board: %w", err)
	}
	if b.lockFD, err = openLock(ctx, db); err != nil {
		return nil, err
	}
	if b.coalesce > 0 {
		b.schedule()
	}
	return b, nil
}

// Path returns the absolute path of the board's TASKS.md.
func (b *Board) Path() string { return b.path }

// Migrate applies the embedded migrations the database does not have yet
// (see package sqlschema). Open calls it; it is exported for tools that
// only need the schema.
func Migrate(ctx context.Context, db *sql.DB) error {
	return sqlschema.Migrate(ctx, db, component, migrationFS, "migrations")
}
