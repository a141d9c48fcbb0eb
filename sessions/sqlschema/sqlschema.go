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

// Load reads the migrations in dir of fsys: files named NNN_what.sql,
// ordered by their number. A file named otherwise, or two files with one
// number, is an error (a build mistake, not a runtime condition).
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		prefix, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: want a name like 001_what.sql", e.Name())
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %q and %q share the number %d", other, e.Name(), v)
		}
		seen[v] = e.Name()
		body, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(body)})
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
func Migrate(ctx context.Context, db *sql.DB, component string, fsys fs.FS, dir string) error {
	ms, err := Load(fsys, dir)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", component, err)
	}
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

func apply(ctx context.Context, db *sql.DB, component string, m Migration) error {
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
