// Package sqltest runs a package's store tests on both of warren's
// databases: a real SQLite file in the test's directory, and a real
// PostgreSQL server (Debian's postgresql-15) that it starts for the test
// binary, initdb'ed into a temporary directory, with a fresh schema per
// data directory (warren's tables go where the URL's search_path says,
// as into a database of their own; a schema is made in milliseconds, a
// database in about a second).
//
// A package uses it from TestMain:
//
//	func TestMain(m *testing.M) { sqltest.Main(m, "") }
//
// and opens its databases with Open(t, dir). Main runs the package's tests
// once on SQLite, then once more on PostgreSQL. A developer who wants the
// SQLite pass alone for a quick loop sets WARREN_TEST_SQLITE_ONLY=1; CI
// and `just test` never do.
package sqltest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "github.com/ncruces/go-sqlite3/driver" // the sqlite3 driver

	"github.com/warrenhq/warren/sessions/sqlschema"
)

var (
	mu      sync.Mutex
	current = sqlschema.SQLite
	server  *Server
	admin   *sql.DB
	made    = map[string]string{} // data dir → schema name
)

// testDB is the database on the tests' server that holds a schema per
// data directory: a schema is made in milliseconds, a database (a copy of
// the template) in about a second.
const testDB = "warren_tests"

// Main runs the package's tests on SQLite, then starts a PostgreSQL
// server and runs them again on it (only the tests matching pgRun when it
// is not empty and no -run was given), stops the server and exits.
func Main(m *testing.M, pgRun string) { os.Exit(Run(m, pgRun)) }

// Run is Main without the exit: it returns the exit code, for a TestMain
// that has more to do before it exits.
func Run(m *testing.M, pgRun string) int {
	code := m.Run()
	if code != 0 || os.Getenv("WARREN_TEST_SQLITE_ONLY") != "" {
		return code
	}
	if f := flag.Lookup("test.run"); pgRun != "" && f != nil && f.Value.String() == "" {
		f.Value.Set(pgRun) //nolint:errcheck // a constant of the package
	}
	s, err := Start(os.TempDir())
	if err != nil {
		fmt.Fprintln(os.Stderr, "sqltest:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "sqltest: the same tests again on PostgreSQL (%s)\n", s.Version)
	mu.Lock()
	server, current = s, sqlschema.Postgres
	admin, err = s.Open(context.Background(), "postgres")
	if err == nil {
		if _, err = admin.Exec(`CREATE DATABASE ` + testDB); err == nil {
			admin.Close()
			admin, err = s.Open(context.Background(), testDB)
		}
	}
	mu.Unlock()
	if err == nil {
		code = m.Run()
		admin.Close()
	} else {
		fmt.Fprintln(os.Stderr, "sqltest:", err)
		code = 1
	}
	s.Stop()
	return code
}

// Dialect is the database the tests run on now.
func Dialect() sqlschema.Dialect {
	mu.Lock()
	defer mu.Unlock()
	return current
}

// Open opens the database of data directory dir for t: the SQLite file
// dir/warren.db as cmd/warren opens it, or on the PostgreSQL pass a
// schema of its own for dir, as warren would use a database of its own
// (created on first use; the same one for every Open of dir). It is
// closed when t ends.
func Open(t testing.TB, dir string) *sql.DB {
	t.Helper()
	db, err := open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// schemaURL is the URL of a schema of the tests' database: warren's
// tables go there (search_path), as into a database of their own.
func schemaURL(schema string) string {
	return server.URL(testDB) + "&search_path=" + schema
}

func open(dir string) (*sql.DB, error) {
	if Dialect() != sqlschema.Postgres {
		return sql.Open("sqlite3", "file:"+filepath.Join(dir, "warren.db")+
			"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)&_pragma=foreign_keys(1)")
	}
	schema, err := database(dir)
	if err != nil {
		return nil, err
	}
	return OpenURL(context.Background(), schemaURL(schema))
}

// database creates the PostgreSQL schema of dir on first use.
func database(dir string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if name, ok := made[abs]; ok {
		return name, nil
	}
	sum := sha256.Sum256([]byte(abs))
	name := "t_" + hex.EncodeToString(sum[:12])
	if _, err := admin.Exec(`CREATE SCHEMA ` + name); err != nil {
		return "", fmt.Errorf("create schema for %s: %w", dir, err)
	}
	made[abs] = name
	return name, nil
}

var (
	lazyOnce sync.Once
	lazy     *Server
	lazyErr  error
	lazyN    int
)

// Shared returns a PostgreSQL server for tests that run on PostgreSQL
// whatever the pass (the e2e tests of the binary, migrating into it): it
// is started on first use, and Stop stops it. TestMain calls StopShared
// after m.Run.
func Shared(t testing.TB) *Server {
	t.Helper()
	lazyOnce.Do(func() { lazy, lazyErr = Start(os.TempDir()) })
	if lazyErr != nil {
		t.Fatal(lazyErr)
	}
	return lazy
}

// StopShared stops the server Shared started, if it did.
func StopShared() {
	if lazy != nil {
		lazy.Stop()
	}
}

// Fresh creates an empty database on s and returns its URL; it is
// dropped when t ends.
func (s *Server) Fresh(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	db, err := s.Open(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mu.Lock()
	lazyN++
	name := fmt.Sprintf("fresh_%d_%d", os.Getpid(), lazyN)
	mu.Unlock()
	if _, err := db.ExecContext(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Bounded: a server a test left unable to commit (a synchronous
		// standby that never comes) must not hold the whole run.
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if db, err := s.Open(ctx, "postgres"); err == nil {
			db.ExecContext(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`) //nolint:errcheck // the server goes anyway
			db.Close()
		}
	})
	return s.URL(name)
}

// OpenURL opens a PostgreSQL URL the way cmd/warren does.
func OpenURL(ctx context.Context, u string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(sqlschema.PostgresConnector(stdlib.GetConnector(*cfg)))
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// URL is the postgres:// URL of database name on s (a Unix socket).
func (s *Server) URL(name string) string {
	q := url.Values{"host": {s.dir}, "port": {s.port}}
	return "postgres://" + s.user + "@/" + name + "?" + q.Encode()
}

// Open opens database name on s.
func (s *Server) Open(ctx context.Context, name string) (*sql.DB, error) {
	return OpenURL(ctx, s.URL(name))
}
