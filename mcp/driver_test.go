package mcp

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/events"

	// The tests of this package open real SQLite databases.
	_ "github.com/ncruces/go-sqlite3/driver"
)

// openTestDB opens a fresh SQLite database in the test's directory.
func openTestDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "warren.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// testUser is who calls the servers of newJailServer.
const testUser = "alice"

// newJailServer is a server set up as 'serve --workspace' sets it up: real
// jails on a bound directory, a 10 GiB quota, the activity log and the
// meter; opts adds to that. Call it with WithUser(ctx, testUser).
func newJailServer(t testing.TB, opts Options) (*Server, *events.Log) {
	t.Helper()
	ctx := context.Background()
	data, ws := t.TempDir(), t.TempDir()
	for _, d := range []string{data, ws} { // the jail's uid must reach them
		if err := os.Chmod(filepath.Dir(d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	db := openTestDB(t)
	store, err := sessions.NewStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := sessions.NewManager(store, sessions.Config{DataDir: data, BindDir: ws, AllowLocalSources: true,
		QuotaBytes: 10 << 30, QuotaInterval: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Close(ctx) })
	activity, err := events.Open(ctx, db, events.Options{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(activity.Close)
	meter, err := metering.Open(ctx, db, metering.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts.Sessions, opts.Meter, opts.Events, opts.Log = mgr, meter, activity, zerolog.Nop()
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, activity
}
