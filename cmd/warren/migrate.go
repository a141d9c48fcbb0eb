package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/agent/transcript"
	"github.com/warrenhq/warren/mcp/oauth"
	"github.com/warrenhq/warren/mcp/tokens"
	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/sessions/events"
	"github.com/warrenhq/warren/sessions/gitpush"
	"github.com/warrenhq/warren/sessions/identity"
	"github.com/warrenhq/warren/tasks"
)

// `warren migrate --from sqlite --to postgres://…` moves a data
// directory's state from its SQLite file into PostgreSQL: both are first
// brought to this warren's schema (each store's own migrations), then
// every table is copied in one PostgreSQL transaction, so that a failure
// leaves the target as it was. The workspaces stay in the data directory.

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:  "migrate",
		Usage: "copy a data directory's state from its SQLite file into PostgreSQL",
		Description: "Reads <data-dir>/warren.db and writes every table into the PostgreSQL database of --to, in one\n" +
			"transaction: all or nothing. Stop the servers using the data directory first (writes made during the copy\n" +
			"would not be in it). The target must be empty, unless --replace. Then serve with --database <the URL>.",
		Flags: []cli.Flag{
			dataDirFlag(),
			&cli.StringFlag{Name: "from", Value: "sqlite", Usage: "where the state is now: sqlite (<data-dir>/warren.db)"},
			&cli.StringFlag{Name: "to", Required: true, Usage: "the PostgreSQL database to fill: a postgres:// URL"},
			&cli.BoolFlag{Name: "replace", Usage: "empty warren's tables in the target first (its other tables are left alone)"},
		},
		Action: runMigrate,
	}
}

func runMigrate(c *cli.Context) error {
	if from := c.String("from"); from != "sqlite" {
		return errs.New(errs.Invalid, fmt.Sprintf("--from %q: only sqlite (the data directory's warren.db) can be migrated from", from))
	}
	dir, err := dataDir(c)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "warren.db")
	if _, err := os.Stat(path); err != nil {
		return errs.Wrap(errs.NotFound, err, fmt.Sprintf("no SQLite database at %s: pass the --data-dir that holds it", path))
	}
	src, err := openDB(c.Context, dir)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := openPostgres(c.Context, c.String("to"))
	if err != nil {
		return err
	}
	defer dst.Close()
	counts, err := migrateData(c.Context, src, dst, c.Bool("replace"))
	if err != nil {
		return err
	}
	out := c.App.Writer
	total := 0
	for _, tc := range counts {
		fmt.Fprintf(out, "%-20s %8d rows\n", tc.table, tc.rows)
		total += tc.rows
	}
	fmt.Fprintf(out, "copied %d rows in %d tables from %s; serve with --database and the same --data-dir (the workspaces stay there)\n",
		total, len(counts), path)
	return nil
}

// migrateSchemas brings db to this warren's schema: every store's
// migrations. A package that adds tables adds its migration here too.
func migrateSchemas(ctx context.Context, db *sql.DB) error {
	steps := []func() error{
		func() error { return sessions.Migrate(ctx, db) },
		func() error { return events.Migrate(ctx, db) },
		func() error { return tasks.Migrate(ctx, db) },
		func() error { _, err := metering.Open(ctx, db, metering.Options{}); return err },
		func() error { _, err := transcript.Open(ctx, db); return err },
		func() error {
			ts, err := tokens.Open(ctx, db)
			if err == nil {
				err = ts.Close()
			}
			return err
		},
		func() error { return oauth.Migrate(ctx, db) },
		func() error { return identity.Migrate(ctx, db) },
		func() error { return gitpush.Migrate(ctx, db) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

type tableCount struct {
	table string
	rows  int
}

// migrateData copies every table of src (SQLite) into dst (PostgreSQL).
func migrateData(ctx context.Context, src, dst *sql.DB, replace bool) ([]tableCount, error) {
	if err := migrateSchemas(ctx, src); err != nil {
		return nil, fmt.Errorf("bring the SQLite database to this warren's schema: %w", err)
	}
	if err := migrateSchemas(ctx, dst); err != nil {
		return nil, fmt.Errorf("create the schema in PostgreSQL: %w", err)
	}
	if err := sameVersions(ctx, src, dst); err != nil {
		return nil, err
	}
	tables, err := sqliteTables(ctx, src)
	if err != nil {
		return nil, err
	}
	tx, err := dst.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable}) // the write lock: no replica writes meanwhile
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after commit
	order, err := pgTableOrder(ctx, tx, tables)
	if err != nil {
		return nil, err
	}
	if err := emptyTarget(ctx, tx, order, replace); err != nil {
		return nil, err
	}
	var counts []tableCount
	for _, t := range order {
		n, err := copyTable(ctx, src, tx, t)
		if err != nil {
			return nil, fmt.Errorf("copy %s: %w", t, err)
		}
		counts = append(counts, tableCount{t, n})
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit the copy: %w", err)
	}
	return counts, nil
}

// sameVersions fails unless both databases record the same components at
// the same versions (a component the SQLite file has and this warren does
// not know was made by another build).
func sameVersions(ctx context.Context, src, dst *sql.DB) error {
	read := func(db *sql.DB) (map[string]int, error) {
		rows, err := db.QueryContext(ctx, `SELECT component, version FROM schema_versions`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		m := map[string]int{}
		for rows.Next() {
			var c string
			var v int
			if err := rows.Scan(&c, &v); err != nil {
				return nil, err
			}
			m[c] = v
		}
		return m, rows.Err()
	}
	a, err := read(src)
	if err != nil {
		return fmt.Errorf("read the SQLite schema versions: %w", err)
	}
	b, err := read(dst)
	if err != nil {
		return fmt.Errorf("read the PostgreSQL schema versions: %w", err)
	}
	for c, v := range a {
		if b[c] != v {
			return fmt.Errorf("the SQLite database has %s at version %d, PostgreSQL at %d: migrate with the warren that "+
				"last served the data directory", c, v, b[c])
		}
	}
	return nil
}

// sqliteTables lists src's tables, less SQLite's own and schema_versions
// (which the target's migrations wrote already).
func sqliteTables(ctx context.Context, src *sql.DB) ([]string, error) {
	rows, err := src.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table'
		AND name NOT LIKE 'sqlite\_%' ESCAPE '\' AND name <> 'schema_versions' ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list the SQLite tables: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// pgTableOrder orders tables so that a table comes after those its
// foreign keys reference, and fails on a table the target lacks.
func pgTableOrder(ctx context.Context, tx *sql.Tx, tables []string) ([]string, error) {
	deps := map[string][]string{}
	for _, t := range tables {
		ok, err := txHasTable(ctx, tx, t)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("the SQLite database has a table %s that this warren does not make in PostgreSQL: "+
				"migrate with the warren that last served the data directory", t)
		}
		rows, err := tx.QueryContext(ctx, `SELECT DISTINCT r.relname FROM pg_constraint c
			JOIN pg_class t ON t.oid = c.conrelid JOIN pg_class r ON r.oid = c.confrelid
			WHERE c.contype = 'f' AND t.relname = ? AND t.relnamespace = current_schema()::regnamespace`, t)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var r string
			if err := rows.Scan(&r); err != nil {
				rows.Close()
				return nil, err
			}
			if r != t {
				deps[t] = append(deps[t], r)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	var order []string
	done := map[string]bool{}
	var visit func(t string, depth int)
	visit = func(t string, depth int) {
		if done[t] || depth > len(tables) {
			return
		}
		for _, d := range deps[t] {
			visit(d, depth+1)
		}
		if !done[t] && slices.Contains(tables, t) {
			done[t] = true
			order = append(order, t)
		}
	}
	for _, t := range tables {
		visit(t, 0)
	}
	return order, nil
}

func txHasTable(ctx context.Context, tx *sql.Tx, name string) (bool, error) {
	var n int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = ?`, name).Scan(&n)
	return n > 0, err
}

// emptyTarget refuses a target that holds rows in any of the tables,
// or with replace empties them.
func emptyTarget(ctx context.Context, tx *sql.Tx, tables []string, replace bool) error {
	if replace {
		if len(tables) == 0 {
			return nil
		}
		_, err := tx.ExecContext(ctx, `TRUNCATE `+strings.Join(quoteAll(tables), ", ")+` CASCADE`)
		return err
	}
	for _, t := range tables {
		var any bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+quoteIdent(t)+`)`).Scan(&any); err != nil {
			return err
		}
		if any {
			return errs.New(errs.Conflict, fmt.Sprintf("the PostgreSQL database already has rows in %s: migrate into an empty "+
				"database, or pass --replace to empty warren's tables there first", t))
		}
	}
	return nil
}

// copyBatch is how many rows one INSERT carries (PostgreSQL takes at most
// 65,535 parameters a statement).
const copyBatch = 500

// copyTable copies table t's rows, the target's columns by name (an
// implicit rowid of SQLite included, where the target has one), and moves
// its identity columns' sequences past the copied values.
func copyTable(ctx context.Context, src *sql.DB, tx *sql.Tx, t string) (int, error) {
	cols, identity, err := pgColumns(ctx, tx, t)
	if err != nil {
		return 0, err
	}
	rows, err := src.QueryContext(ctx, `SELECT `+strings.Join(quoteAll(cols), ", ")+` FROM `+quoteIdent(t))
	if err != nil {
		return 0, fmt.Errorf("read from SQLite: %w", err)
	}
	defer rows.Close()
	insert := `INSERT INTO ` + quoteIdent(t) + ` (` + strings.Join(quoteAll(cols), ", ") + `) OVERRIDING SYSTEM VALUE VALUES `
	var args []any
	n, pending := 0, 0
	flush := func() error {
		if pending == 0 {
			return nil
		}
		var b strings.Builder
		b.WriteString(insert)
		for r := range pending {
			if r > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(")
			for c := range cols {
				if c > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "?%d", r*len(cols)+c+1)
			}
			b.WriteString(")")
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
		args, pending = args[:0], 0
		return nil
	}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return n, err
		}
		for i, v := range vals {
			if b, ok := v.([]byte); ok { // SQLite hands TEXT in a BLOB-typed value back as bytes
				vals[i] = string(b)
			}
		}
		args = append(args, vals...)
		pending++
		n++
		if pending == copyBatch {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return n, err
	}
	if err := flush(); err != nil {
		return n, err
	}
	for _, c := range identity {
		if _, err := tx.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence(?1, ?2),
			COALESCE((SELECT max(`+quoteIdent(c)+`) FROM `+quoteIdent(t)+`), 0) + 1, false)`, t, c); err != nil {
			return n, fmt.Errorf("move the sequence of %s.%s: %w", t, c, err)
		}
	}
	return n, nil
}

// pgColumns lists table t's columns in the target, and which are
// identity columns.
func pgColumns(ctx context.Context, tx *sql.Tx, t string) (cols, identity []string, err error) {
	rows, err := tx.QueryContext(ctx, `SELECT column_name, is_identity FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position`, t)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var c, ident string
		if err := rows.Scan(&c, &ident); err != nil {
			return nil, nil, err
		}
		cols = append(cols, c)
		if ident == "YES" {
			identity = append(identity, c)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if len(cols) == 0 {
		return nil, nil, errors.New("no columns in PostgreSQL")
	}
	return cols, identity, nil
}

// quoteIdent quotes a name read from the databases' catalogs.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = quoteIdent(s)
	}
	return out
}
