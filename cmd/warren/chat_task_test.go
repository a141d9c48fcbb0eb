package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenhq/warren/agent"
	"github.com/warrenhq/warren/mcp"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/tasks"
)

// While a chat works on a task, its claim is renewed: long after the
// first lease would have ended, the task is still the session's. The
// board's clock is driven by the test, and so are the renewals.
func TestTaskClaimIsRenewedWhileTheChatWorks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "warren.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mu sync.Mutex
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	board, err := tasks.Open(ctx, db, tasks.Options{Path: filepath.Join(dir, "TASKS.md"), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	store, err := sessions.NewStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := sessions.NewManager(store, sessions.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close(ctx)
	srv, err := mcp.New(mcp.Options{Sessions: mgr, Tasks: board, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tools, err := agent.ConnectInProcess(ctx, srv.MCPServer(), func(ctx context.Context) context.Context { return mcp.WithUser(ctx, "alice") }, "cli")
	if err != nil {
		t.Fatal(err)
	}
	defer tools.Close()
	s, err := mgr.Create(ctx, "alice", sessions.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := board.Add(ctx, "make the tests pass"); err != nil {
		t.Fatal(err)
	}
	id, _, err := claimTask(ctx, tools, "next", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	ticks := make(chan time.Time)
	var lost []string
	stop := keepClaim(ctx, tools, id, s.ID, ticks, func(m string) { lost = append(lost, m) })
	for range 4 { // two leases' worth of renewals, ten minutes apart
		advance(renewEvery)
		ticks <- time.Time{}
	}
	ticks <- time.Time{} // the fourth renewal has run once the fifth tick is taken
	stop()
	task, err := board.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if task.Claim == nil || task.Claim.Holder.Session != s.ID || len(lost) > 0 {
		t.Fatalf("after %v the claim is %+v (lost: %q): it was not renewed", 4*renewEvery, task.Claim, lost)
	}

	// A claim lost to someone else is said, not silently retaken.
	advance(tasks.DefaultLease + time.Minute)
	if _, err := board.Claim(ctx, id, tasks.Holder{User: "bob", Session: "s-bob"}, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	stop = keepClaim(ctx, tools, id, s.ID, ticks, func(m string) { lost = append(lost, m); close(done) })
	ticks <- time.Time{}
	<-done
	stop()
	if len(lost) != 1 || !strings.Contains(lost[0], "could not be renewed") {
		t.Errorf("lost %q", lost)
	}
}
