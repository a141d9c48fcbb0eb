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
	// File reaches Path: RunnerFile for a board in a workspace, whose
	// names are the jails'. Nil: the server reads and writes Path itself,
	// for a board outside every workspace (see BoardFile). The Board
	// closes it.
	File BoardFile
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
	file     BoardFile
	host     *hostFile // file, when the server reaches it itself
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
	write func(ctx context.Context, data []byte, was current) (FileStamp, error)
	// step, set only by tests (setStep), runs between the steps of a
	// sync: the moments a hand edit or a change can race a write.
	step func(name string)
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
	if err := Migrate(ctx, db); err != nil {
		return nil, err
	}
	b := &Board{db: db, path: path, file: opts.File, now: opts.Now, lease: opts.Lease, coalesce: opts.Coalesce,
		lockFD: -1, settle: settleTime, pg: sqlschema.DialectOf(db) == sqlschema.Postgres}
	if b.file == nil {
		b.host = newHostFile(path)
		b.file = b.host
	}
	b.write = func(ctx context.Context, data []byte, was current) (FileStamp, error) {
		return b.file.Write(ctx, data, was.stamp)
	}
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

// at runs the test hook of a step; nil in production.
func (b *Board) at(name string) {
	if b.step != nil {
		b.step(name)
	}
}

// setStep sets the test hook of the steps of a sync, and of a write the
// server makes itself.
func (b *Board) setStep(fn func(string)) {
	b.step = fn
	if b.host != nil {
		b.host.step = fn
	}
}

// statSig is the signature of the file as it is now: the cheap check
// that tells whether anyone touched it since the last sync.
func (b *Board) statSig(ctx context.Context) string {
	s, err := b.file.Stat(ctx)
	if err != nil {
		return "unreadable"
	}
	return s.sig()
}

// Migrate applies the embedded migrations the database does not have yet
// (see package sqlschema). Open calls it; it is exported for tools that
// only need the schema.
func Migrate(ctx context.Context, db *sql.DB) error {
	return sqlschema.Migrate(ctx, db, component, migrationFS, "migrations")
}
