package sqlschema

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strconv"
	"strings"
)

// warren's state lives in SQLite (the embedded default, one file in the
// data directory) or in PostgreSQL (--database postgres://…, shared by
// replicas). Every store is handed one *sql.DB and writes its SQL once, in
// SQLite's spelling with ? placeholders; the differences are handled here,
// in one place:
//
//   - The dialect travels with the *sql.DB: a PostgreSQL handle is opened
//     through PostgresConnector, whose driver says so (DialectOf). A store
//     asks only where its SQL really differs (a PRAGMA, a lock).
//   - Placeholders: PostgresConnector rewrites ? and ?N to $N in every
//     statement before the driver sees it (Rebind).
//   - Booleans: warren keeps flags in INTEGER columns (0 or 1) on both;
//     PostgresConnector passes a Go bool as 0 or 1, as SQLite's driver does.
//   - Write transactions: SQLite's BEGIN IMMEDIATE, which the stores ask
//     for as sql.LevelSerializable, lets one writer in at a time. On
//     PostgreSQL the same request begins a READ COMMITTED transaction that
//     first takes a transaction-level advisory lock (WriteLockKey): writers
//     that relied on the single writer stay serialized, across replicas.
//   - Migrations: NNN_what.sql is shared; NNN_what.postgres.sql, when
//     present, replaces it on PostgreSQL (types: BIGINT for the int64
//     columns SQLite calls INTEGER, identity columns for rowids).

// Dialect is the SQL dialect of a database.
type Dialect int

const (
	// SQLite is the embedded default: <data-dir>/warren.db.
	SQLite Dialect = iota
	// Postgres is PostgreSQL, through pgx's database/sql driver wrapped by
	// PostgresConnector.
	Postgres
)

func (d Dialect) String() string {
	if d == Postgres {
		return "postgres"
	}
	return "sqlite"
}

// WriteLockKey is the PostgreSQL advisory lock that write transactions
// (sql.LevelSerializable) take: SQLite's single writer, across replicas.
// Other advisory locks of warren use two-key locks (pg_advisory_lock(int,
// int)), a separate key space.
const WriteLockKey int64 = 0x77617272656e // "warren"

// dialecter is implemented by the driver of a database opened through
// PostgresConnector.
type dialecter interface{ SQLDialect() Dialect }

// DialectOf returns the dialect of db: Postgres for a database opened
// through PostgresConnector, SQLite otherwise.
func DialectOf(db *sql.DB) Dialect {
	if d, ok := db.Driver().(dialecter); ok {
		return d.SQLDialect()
	}
	return SQLite
}

// Rebind rewrites the placeholders of query from SQLite's ? and ?N to
// PostgreSQL's $N. Question marks inside string literals, quoted
// identifiers and comments are left alone.
func Rebind(query string) string {
	if strings.IndexByte(query, '?') < 0 {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 8)
	n := 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(query) {
				if query[j] == c {
					if j+1 < len(query) && query[j+1] == c { // doubled: an escaped quote
						j += 2
						continue
					}
					break
				}
				j++
			}
			end := min(j+1, len(query))
			b.WriteString(query[i:end])
			i = end - 1
		case c == '-' && i+1 < len(query) && query[i+1] == '-':
			j := strings.IndexByte(query[i:], '\n')
			if j < 0 {
				j = len(query) - i - 1
			}
			b.WriteString(query[i : i+j+1])
			i += j
		case c == '/' && i+1 < len(query) && query[i+1] == '*':
			j := strings.Index(query[i+2:], "*/")
			end := len(query)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			b.WriteString(query[i:end])
			i = end - 1
		case c == '?':
			j := i + 1
			for j < len(query) && query[j] >= '0' && query[j] <= '9' {
				j++
			}
			b.WriteByte('$')
			if j > i+1 {
				b.WriteString(query[i+1 : j])
			} else {
				n++
				b.WriteString(strconv.Itoa(n))
			}
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// PostgresConnector wraps the connector of a PostgreSQL driver (pgx's
// stdlib.GetConnector) so that warren's stores, written for SQLite, run
// on it unchanged: see the comment at the top of this file.
func PostgresConnector(c driver.Connector) driver.Connector {
	return pgConnector{c}
}

type pgConnector struct{ driver.Connector }

func (c pgConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &pgConn{conn}, nil
}

func (c pgConnector) Driver() driver.Driver { return pgDriver{c.Connector.Driver()} }

type pgDriver struct{ driver.Driver }

func (pgDriver) SQLDialect() Dialect { return Postgres }

// pgConn forwards to the driver's connection (which must offer the
// context variants, as pgx's does), rebinding each query.
type pgConn struct{ driver.Conn }

var (
	_ driver.ExecerContext      = (*pgConn)(nil)
	_ driver.QueryerContext     = (*pgConn)(nil)
	_ driver.ConnPrepareContext = (*pgConn)(nil)
	_ driver.ConnBeginTx        = (*pgConn)(nil)
	_ driver.NamedValueChecker  = (*pgConn)(nil)
	_ driver.Pinger             = (*pgConn)(nil)
	_ driver.SessionResetter    = (*pgConn)(nil)
)

func (c *pgConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *pgConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, Rebind(query))
}

func (c *pgConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, Rebind(query), args)
}

func (c *pgConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, Rebind(query), args)
}

func (c *pgConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx turns a write transaction (LevelSerializable: BEGIN IMMEDIATE on
// SQLite) into READ COMMITTED plus the advisory write lock, held until it
// ends.
func (c *pgConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	write := sql.IsolationLevel(opts.Isolation) == sql.LevelSerializable
	if write {
		opts.Isolation = driver.IsolationLevel(sql.LevelReadCommitted)
	}
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil || !write || opts.ReadOnly {
		return tx, err
	}
	// lock_timeout is SQLite's busy timeout: a writer that waits longer
	// fails (and changed nothing) instead of hanging.
	if _, err := c.Conn.(driver.ExecerContext).ExecContext(ctx,
		"SELECT set_config('lock_timeout', '10s', true), pg_advisory_xact_lock($1)",
		[]driver.NamedValue{{Ordinal: 1, Value: WriteLockKey}}); err != nil {
		tx.Rollback() //nolint:errcheck // the lock's error says it
		return nil, err
	}
	return tx, nil
}

// CheckNamedValue passes a bool as 0 or 1 (flags are INTEGER columns) and
// everything else to the driver as it is.
func (c *pgConn) CheckNamedValue(v *driver.NamedValue) error {
	if b, ok := v.Value.(bool); ok {
		v.Value = int64(0)
		if b {
			v.Value = int64(1)
		}
		return nil
	}
	if nc, ok := c.Conn.(driver.NamedValueChecker); ok {
		return nc.CheckNamedValue(v)
	}
	return driver.ErrSkip
}

func (c *pgConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *pgConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// HasTable reports whether db has a table of that name (in the current
// schema on PostgreSQL).
func HasTable(ctx context.Context, db *sql.DB, name string) (bool, error) {
	q := `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`
	if DialectOf(db) == Postgres {
		q = `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = ?`
	}
	var n int
	err := db.QueryRowContext(ctx, q, name).Scan(&n)
	return n > 0, err
}
