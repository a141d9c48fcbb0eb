// Package sqlschema is warren's one migration mechanism. Every package
// that keeps tables (sessions, tasks, metering, tokens, the agent's
// transcripts, the event log, …) owns them and their migrations, embedded
// as numbered SQL files (NNN_what.sql), and applies them with Migrate
// under a component name of its own; one table, schema_versions, records
// each component's version.
//
// It lives under sessions only because the repository's top level is
// fixed; it imports nothing but the standard library, and any store may
// use it.
package sqlschema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered SQL file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// pgSuffix marks a migration's PostgreSQL variant: NNN_what.postgres.sql
// replaces NNN_what.sql on PostgreSQL, where the SQL really differs.
const pgSuffix = ".postgres.sql"

// Load reads the SQLite migrations in dir of fsys: files named
// NNN_what.sql, ordered by their number (see LoadFor).
func Load(fsys fs.FS, dir string) ([]Migration, error) { return LoadFor(fsys, dir, SQLite) }

// LoadFor reads the migrations of dialect d in dir of fsys: files named
// NNN_what.sql, ordered by their number; on PostgreSQL a file
// NNN_what.postgres.sql takes the place of its NNN_what.sql. A file named
// otherwise, two files with one number, or a PostgreSQL variant without
// its shared file is an error (a build mistake, not a runtime condition).
func LoadFor(fsys fs.FS, dir string, d Dialect) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	seen := map[int]string{}
	variants := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		prefix, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: want a name like 001_what.sql", e.Name())
		}
		if strings.HasSuffix(e.Name(), pgSuffix) {
			variants[v] = e.Name()
			continue
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %q and %q share the number %d", other, e.Name(), v)
		}
		seen[v] = e.Name()
	}
	for v, name := range variants {
		if want := strings.TrimSuffix(name, pgSuffix) + ".sql"; seen[v] != want {
			return nil, fmt.Errorf("migration %q: a PostgreSQL variant needs its shared file %q", name, want)
		}
		if d == Postgres {
			seen[v] = name
		}
	}
	for v, name := range seen {
		body, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// writeTx takes SQLite's write lock when the transaction begins (BEGIN
// IMMEDIATE with the ncruces driver): two processes opening one database
// at once then queue on the busy timeout instead of both reading the old
// version and one failing at commit.
var writeTx = &sql.TxOptions{Isolation: sql.LevelSerializable}

// Migrate applies component's migrations from dir of fsys that are newer
// than its recorded version, each in its own transaction with the version
// re-read inside it, so that concurrent openers apply each exactly once.
// A database newer than this build (a version above the last migration)
// is refused: this build would misread it.
//
// On PostgreSQL the whole run holds an advisory lock (MigrateLockKey), so
// that replicas starting at once do not race on CREATE TABLE.
func Migrate(ctx context.Context, db *sql.DB, component string, fsys fs.FS, dir string) error {
	d := DialectOf(db)
	ms, err := LoadFor(fsys, dir, d)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", component, err)
	}
	if d != Postgres {
		return migrate(ctx, db, component, ms)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", component, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(?)`, MigrateLockKey); err != nil {
		return fmt.Errorf("migrate %s: lock: %w", component, err)
	}
	//nolint:errcheck // closing the connection's session drops it too
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(?)`, MigrateLockKey)
	return migrate(ctx, conn, component, ms)
}

// MigrateLockKey is the PostgreSQL advisory lock that Migrate holds.
const MigrateLockKey = WriteLockKey + 1

// handle is a *sql.DB or one of its *sql.Conn.
type handle interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

func migrate(ctx context.Context, db handle, component string, ms []Migration) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_versions (
		component TEXT PRIMARY KEY,
		version INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("migrate %s: create schema_versions: %w", component, err)
	}
	current, err := Version(ctx, db, component)
	if err != nil {
		return err
	}
	if n := len(ms); n > 0 && current > ms[n-1].Version {
		return fmt.Errorf("migrate %s: the database is at version %d, newer than this warren (which knows %d): "+
			"run a newer warren, or restore a backup made for this version", component, current, ms[n-1].Version)
	}
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		if err := apply(ctx, db, component, m); err != nil {
			return err
		}
	}
	return nil
}

// Version returns component's recorded version, 0 when it has none.
func Version(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, component string) (int, error) {
	var v int
	err := q.QueryRowContext(ctx, `SELECT version FROM schema_versions WHERE component = ?`, component).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("migrate %s: read schema version: %w", component, err)
	}
	return v, nil
}

func apply(ctx context.Context, db handle, component string, m Migration) error {
	tx, err := db.BeginTx(ctx, writeTx)
	if err != nil {
		return fmt.Errorf("migrate %s: begin %s: %w", component, m.Name, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after commit
	current, err := Version(ctx, tx, component)
	if err != nil {
		return err
	}
	if current >= m.Version {
		return nil // another process applied it meanwhile
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("migrate %s: apply %s: %w", component, m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_versions (component, version) VALUES (?, ?)
		ON CONFLICT (component) DO UPDATE SET version = excluded.version`, component, m.Version); err != nil {
		return fmt.Errorf("migrate %s: record version %d: %w", component, m.Version, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate %s: commit %s: %w", component, m.Name, err)
	}
	return nil
}
