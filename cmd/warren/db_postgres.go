package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/sessions/sqlschema"
)

// databaseFlag is shared by every command that opens the database: empty
// is the embedded SQLite file in the data directory.
func databaseFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "database",
		EnvVars: []string{"WARREN_DATABASE"},
		Usage: "keep warren's state in PostgreSQL: a postgres://user@host/db URL (see docs/postgres.md). " +
			"Default: <data-dir>/warren.db (SQLite). The workspaces stay in the data directory either way",
	}
}

// openDatabase opens the database the command was given: --database's
// PostgreSQL, else <dir>/warren.db.
func openDatabase(c *cli.Context, dir string) (*sql.DB, error) {
	if u := c.String("database"); u != "" {
		return openPostgres(c.Context, u)
	}
	return openDB(c.Context, dir)
}

// isPostgresURL reports whether s names a PostgreSQL database.
func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// pgIdleConns is how many connections one warren keeps open between
// calls. Open connections are not capped, as with SQLite: a cap could
// leave a call that holds one connection waiting forever for a second;
// PostgreSQL's max_connections bounds them instead, with an error.
const pgIdleConns = 8

// openPostgres opens a PostgreSQL database through pgx's database/sql
// driver, wrapped so that the stores' SQL runs unchanged (sqlschema). Its
// errors never repeat the URL, which may hold a password. opts tune pgx's
// connector (a test turns its reuse ping off).
func openPostgres(ctx context.Context, u string, opts ...stdlib.OptionOpenDB) (*sql.DB, error) {
	if !isPostgresURL(u) {
		return nil, errs.New(errs.Invalid, "--database takes a postgres:// URL (e.g. postgres://warren@db.example/warren); "+
			"leave it out to keep the state in <data-dir>/warren.db")
	}
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "--database: not a PostgreSQL URL warren can use: "+redactedError(err, u))
	}
	where := fmt.Sprintf("PostgreSQL database %q on %s", cfg.Database, cfg.Host)
	db := sql.OpenDB(sqlschema.PostgresConnector(unreachable{stdlib.GetConnector(*cfg, opts...), where, u}))
	db.SetMaxIdleConns(pgIdleConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("%w (as user %q): check that the server runs and that the URL's user may connect", err, cfg.User)
	}
	return db, nil
}

// redactedError is err's text without the URL's password.
func redactedError(err error, u string) string {
	msg := err.Error()
	if cfg, perr := pgx.ParseConfig(u); perr == nil && cfg.Password != "" {
		msg = strings.ReplaceAll(msg, cfg.Password, "xxxxx")
	}
	return msg
}

// sameDatabase is the --database part of a command line printed for the
// operator to run: the URL is not repeated (it may hold a password).
func sameDatabase(c *cli.Context) string {
	if c.String("database") == "" {
		return ""
	}
	return " --database <the same URL>"
}

// unreachable turns a failure to connect (the server down, restarting,
// out of connections) into one coded error (unavailable) that names the
// database and says that nothing was done; the connections it makes do
// the same when they break under a call (lostConn), or say that the call
// may have been kept where that cannot be known.
type unreachable struct {
	driver.Connector
	where, url string
}

func (c unreachable) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, fmt.Sprintf("cannot reach the %s (%s): nothing was changed; retry once it is back",
			c.where, redactedError(err, c.url)))
	}
	return &lostConn{Conn: conn, c: c}, nil
}
