package main

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/sessions/sqlschema/sqltest"
)

// PostgreSQL stopping under idle pooled connections: every way a store
// writes (a write transaction from the pool, one on a held connection as
// metering does, a plain statement, a statement in an open transaction,
// a commit) fails with warren's coded unavailable error naming the
// database, never a bare "broken pipe". pgx skips its reuse ping on a
// connection used within the last second; the handle here never pings,
// so the dead connections are handed out every time.
func TestPostgresGoneUnderIdleConnections(t *testing.T) {
	s, url := ownPostgres(t)
	ctx := context.Background()
	never := stdlib.OptionShouldPing(func(context.Context, stdlib.ShouldPingParams) bool { return false })
	db, err := openPostgres(ctx, url, never)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE kept (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	write := &sql.TxOptions{Isolation: sql.LevelSerializable}
	// Six connections that each wrote, back idle in the pool.
	var held []*sql.Conn
	for range 6 {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ExecContext(ctx, `INSERT INTO kept VALUES (1)`); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Close()
	}
	// Two transactions open across the stop: one writes after it, one
	// (not holding the write lock, which the first does) commits after it.
	open, err := db.BeginTx(ctx, write)
	if err != nil {
		t.Fatal(err)
	}
	prepared, err := open.PrepareContext(ctx, `INSERT INTO kept VALUES (?)`) // as metering inserts
	if err != nil {
		t.Fatal(err)
	}
	committing, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := committing.ExecContext(ctx, `INSERT INTO kept VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	s.Down()

	name := `cannot reach the PostgreSQL database "` + url[strings.LastIndex(url, "/")+1:strings.Index(url, "?")] + `"`
	coded := func(what string, err error, says ...string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s with the database stopped: no error", what)
		}
		msg := err.Error()
		t.Logf("%s: %s", what, msg)
		if errs.CodeOf(err) != errs.Unavailable {
			t.Errorf("%s: error code %q, want unavailable: %s", what, errs.CodeOf(err), msg)
		}
		for _, want := range says {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: the error lacks %q: %s", what, want, msg)
			}
		}
	}
	_, err = db.BeginTx(ctx, write)
	coded("a write transaction from the pool", err, name, "nothing was changed; retry once it is back")

	c, err := db.Conn(ctx)
	if err == nil {
		_, err = c.BeginTx(ctx, write)
		c.Close()
	}
	coded("a write transaction on a held connection", err, name, "nothing was changed; retry once it is back")

	_, err = db.ExecContext(ctx, `INSERT INTO kept VALUES (3)`)
	coded("a plain statement", err, name)

	_, err = open.ExecContext(ctx, `INSERT INTO kept VALUES (4)`)
	coded("a statement in an open transaction", err, "PostgreSQL database", "nothing was changed")
	_, err = prepared.ExecContext(ctx, 4)
	coded("a prepared statement in an open transaction", err, "PostgreSQL database", "nothing was changed")
	open.Rollback() //nolint:errcheck // the connection is gone

	err = committing.Commit()
	coded("a commit", err, "PostgreSQL database")
	if msg := err.Error(); !strings.Contains(msg, "nothing was changed") && !strings.Contains(msg, "may or may not have been kept; check before retrying") {
		t.Errorf("a commit whose connection broke claims more than is known: %s", msg)
	}
	if errors.Is(err, sql.ErrTxDone) {
		t.Errorf("the commit's error is database/sql's, not the connection's: %v", err)
	}

	// Back up: the next write works, on new connections.
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO kept VALUES (5)`); err != nil {
		t.Fatalf("a write once PostgreSQL is back: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM kept WHERE x IN (2, 4)`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows of transactions that failed: %d (%v), want 0", n, err)
	}
}

// ownPostgres starts a PostgreSQL server of the test's own, which the test
// may stop and start again, and returns it with a fresh database's URL.
func ownPostgres(t *testing.T) (*sqltest.Server, string) {
	t.Helper()
	s, err := sqltest.Start(os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s, s.Fresh(t)
}

// A COMMIT that PostgreSQL received but could not confirm (it waits for
// a synchronous standby that never comes, and the server stops): the
// change is kept, so the error must not say that nothing was changed; it
// says to check before retrying.
func TestPostgresGoneDuringCommitSaysItMayBeKept(t *testing.T) {
	s, url := ownPostgres(t)
	ctx := context.Background()
	db, err := openPostgres(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`CREATE TABLE kept (x INTEGER)`,
		`ALTER SYSTEM SET synchronous_standby_names = 'nobody'`, `SELECT pg_reload_conf()`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// However the test ends, the setting goes: with it every commit on
	// the server waits for the standby forever, the dropping of the
	// test's database (Fresh) included.
	t.Cleanup(func() {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if rdb, err := openPostgres(rctx, url); err == nil {
			rdb.ExecContext(rctx, `ALTER SYSTEM RESET synchronous_standby_names`) //nolint:errcheck // best effort; the server stops next
			rdb.ExecContext(rctx, `SELECT pg_reload_conf()`)                      //nolint:errcheck
			rdb.Close()
		}
	})
	// The reload reaches each connection's backend later, through the
	// postmaster: the transaction's connection must have it before it
	// commits, or the commit does not wait (and the test saw a commit
	// that returned at once).
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for setting := ""; setting != "nobody"; {
		if err := conn.QueryRowContext(ctx, `SHOW synchronous_standby_names`).Scan(&setting); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // a poll, not a deadline
	}
	done := make(chan error, 1)
	go func() {
		tx, err := conn.BeginTx(ctx, nil)
		if err == nil {
			if _, err = tx.ExecContext(ctx, `INSERT INTO kept VALUES (1)`); err == nil {
				err = tx.Commit()
			} else {
				tx.Rollback() //nolint:errcheck // the error says
			}
		}
		done <- err
	}()
	// Wait until the COMMIT is at the server, waiting for the standby.
	for waiting := 0; waiting == 0; {
		select {
		case err := <-done:
			t.Fatalf("the commit returned before it waited for the standby: %v", err)
		default:
		}
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // a poll, not a deadline
	}
	s.Down()
	err = <-done
	if err == nil {
		t.Fatal("the commit succeeded with the server stopped under it")
	}
	msg := err.Error()
	t.Logf("the commit: %s", msg)
	if errs.CodeOf(err) != errs.Unavailable || !strings.Contains(msg, "PostgreSQL database") ||
		!strings.Contains(msg, "may or may not have been kept; check before retrying") || strings.Contains(msg, "nothing was changed") {
		t.Errorf("a commit the server received, then the connection lost (code %q): %s", errs.CodeOf(err), msg)
	}
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`ALTER SYSTEM RESET synchronous_standby_names`, `SELECT pg_reload_conf()`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM kept`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d rows of the commit in doubt (%v): the test expects PostgreSQL kept it", n, err)
	}
}
