package sessions

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenhq/warren/sandbox/runner/runnertest"
	"github.com/warrenhq/warren/sessions/sqlschema/sqltest"
)

// TestMain builds the jail's runner, then runs the tests on SQLite and the
// store's again on PostgreSQL (sqltest): the others exercise jails, which
// do not depend on the database.
func TestMain(m *testing.M) {
	cleanup, err := runnertest.Install()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := sqltest.Run(m, "TestLifecycleTransitions|TestOwnershipAndSessionCap|TestDefaultSessions|TestBindDirGetsItsOwnDefaultSession|"+
		"TestShellStateSurvivesARestartAndIdleStops|TestPauseStopsTheShell|TestDeleteByAnotherProcessStopsTheShell|"+
		"TestCopyOfASessionTakesItsCurrentState|TestSessionErrorsCarryCodes|TestRunningShellCapStopsTheLeastRecentlyUsed|TestNetworkLog|"+
		"TestLease|TestStaleLease|TestNoLeases|TestMCPSessions")
	cleanup()
	os.Exit(code)
}

// openDB opens the data directory's database: a real SQLite file, or on
// the PostgreSQL pass a real PostgreSQL database.
func openDB(t testing.TB, dir string) *sql.DB {
	t.Helper()
	return sqltest.Open(t, dir)
}

func newManager(t testing.TB, db *sql.DB, cfg Config) *Manager {
	t.Helper()
	store, err := NewStore(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDefaultSessionsAreOwnedAndSurviveARestart(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	db := openDB(t, data)
	m := newManager(t, db, Config{DataDir: data})

	alice, err := m.Get(ctx, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := m.Get(ctx, "alice", "")
	bob, _ := m.Get(ctx, "bob", "")
	if again.ID != alice.ID || bob.ID == alice.ID || alice.Mode != ModeEmpty {
		t.Fatalf("default sessions: alice %s/%s, bob %s", alice.ID, again.ID, bob.ID)
	}
	if _, err := m.Get(ctx, "bob", alice.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob got alice's session: %v", err)
	}
	state := ShellState{Cwd: "/workspace/src", Env: map[string]string{"A": "1"}}
	if err := m.Store().SaveShell(ctx, alice.ID, state); err != nil {
		t.Fatal(err)
	}

	// A new manager over the same database: what a restarted server sees.
	m2 := newManager(t, db, Config{DataDir: data})
	got, err := m2.Get(ctx, "alice", "")
	if err != nil || got.ID != alice.ID || got.Shell.Cwd != "/workspace/src" || got.Shell.Env["A"] != "1" {
		t.Fatalf("after restart: %+v %v", got, err)
	}
	list, _ := m2.List(ctx, "alice", false)
	if len(list) != 1 {
		t.Fatalf("alice lists %d sessions", len(list))
	}
}

func TestBindDirGetsItsOwnDefaultSession(t *testing.T) {
	ctx := context.Background()
	data, ws := jailData(t), jailData(t)
	db := openDB(t, data)
	plain := newManager(t, db, Config{DataDir: data})
	bound := newManager(t, db, Config{DataDir: data, BindDir: ws})
	a, _ := plain.Get(ctx, "alice", "")
	b, err := bound.Get(ctx, "alice", "")
	if err != nil || a.ID == b.ID || b.Workspace != ws || b.Mode != ModeBind {
		t.Fatalf("bound default: %+v %v", b, err)
	}
	if _, err := NewManager(bound.Store(), Config{BindDir: filepath.Join(ws, "missing")}); err == nil {
		t.Fatal("a missing --workspace was accepted")
	}
}
