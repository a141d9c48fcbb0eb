package tokens

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/warrenhq/warren/sessions/sqlschema/sqltest"
)

// TestMain runs the tests on SQLite, then on PostgreSQL (sqltest).
func TestMain(m *testing.M) { sqltest.Main(m, "") }

func openTestDB(t *testing.T) *sql.DB {
	t.Helper()
	return sqltest.Open(t, t.TempDir())
}

func TestTokensAuthenticateAndRevoke(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	server, err := Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	server.Now = func() time.Time { return clock }
	tok, info, err := server.Create(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // the second and third come from the cache
		if user, err := server.Authenticate(ctx, tok); err != nil || user != "alice" {
			t.Fatalf("Authenticate = %q, %v", user, err)
		}
	}
	if _, err := server.Authenticate(ctx, tok+"x"); !errors.Is(err, ErrBadToken) {
		t.Fatalf("a wrong token: %v", err)
	}

	// Revoked by another process (the CLI): refused once the cache expires.
	cli, err := Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.Revoke(ctx, info.Prefix); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(authTTL + time.Second)
	if _, err := server.Authenticate(ctx, tok); !errors.Is(err, ErrBadToken) {
		t.Fatalf("a token revoked elsewhere still works after %s: %v", authTTL, err)
	}

	// Revoked in this process: refused at once.
	tok2, info2, _ := server.Create(ctx, "bob")
	if _, err := server.Authenticate(ctx, tok2); err != nil {
		t.Fatal(err)
	}
	if err := server.Revoke(ctx, info2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := server.Authenticate(ctx, tok2); !errors.Is(err, ErrBadToken) {
		t.Fatalf("a token revoked here still works: %v", err)
	}
}

// TestAuthenticateDoesNotWaitForTheDatabaseLock: while another connection
// holds the database's write lock, a token is still checked at once; its
// last use reaches the database later, and at Close.
func TestAuthenticateDoesNotWaitForTheDatabaseLock(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "warren.db")
	open := func() *sql.DB {
		// A busy timeout longer than the test's patience: a write on the
		// request path would wait for the lock.
		db, err := sql.Open("sqlite3", "file:"+path+"?_pragma=busy_timeout(120000)&_pragma=journal_mode(wal)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db := open()
	store, err := Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	tok, info, err := store.Create(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}

	other := open()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	authenticated := make(chan error, 1)
	go func() {
		user, err := store.Authenticate(ctx, tok)
		if err == nil && user != "alice" {
			err = fmt.Errorf("user %q", user)
		}
		authenticated <- err
	}()
	select {
	case err := <-authenticated:
		if err != nil {
			t.Fatalf("Authenticate while the database is locked: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Authenticate waited for another connection's write lock")
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}

	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	tokens, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 1 || tokens[0].ID != info.ID || tokens[0].LastUsed.IsZero() {
		t.Fatalf("last use not recorded at Close: %+v", tokens)
	}
}
