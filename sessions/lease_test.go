package sessions

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/sessions/errs"
)

// replicas returns two managers on one database and data directory, as
// two replicas of serve http.
func replicas(t *testing.T, ttl, wait time.Duration) (a, b *Manager) {
	t.Helper()
	data := jailData(t)
	db := openDB(t, data)
	mk := func(id string) *Manager {
		m := newManager(t, db, Config{DataDir: data, Lease: &LeaseConfig{ReplicaID: id, TTL: ttl, Wait: wait}})
		t.Cleanup(func() { m.Close(context.Background()) })
		return m
	}
	return mk("replica-a"), mk("replica-b")
}

// The jail of a session moves with its calls: a command on B after one on
// A finds A's cwd and exports, and A's jail is stopped, never two at once.
func TestLeaseHandsTheJailOverBetweenReplicas(t *testing.T) {
	ctx := context.Background()
	a, b := replicas(t, time.Second, 10*time.Second)
	s, err := a.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(ctx, "alice", s.ID, "cd /tmp && export X=from-a", ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	if !a.Running(s.ID) {
		t.Fatal("A's jail does not run after its command")
	}
	o, err := b.Exec(ctx, "alice", s.ID, "pwd; echo $X", ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(o.Result.Stdout) != "/tmp\nfrom-a\n" {
		t.Fatalf("B's shell after A's: %q", o.Result.Stdout)
	}
	if a.Running(s.ID) || !b.Running(s.ID) {
		t.Fatalf("after the handover: A runs the jail %v, B %v; want only B", a.Running(s.ID), b.Running(s.ID))
	}
	o, err = a.Exec(ctx, "alice", s.ID, "echo $X", ExecOptions{})
	if err != nil || string(o.Result.Stdout) != "from-a\n" || b.Running(s.ID) {
		t.Fatalf("back on A: %q %v (B still runs: %v)", o.Result.Stdout, err, b.Running(s.ID))
	}
}

// A replica whose command still runs keeps the session: the other's call
// waits its bounded time and fails with a busy error naming the holder.
func TestLeaseIsNotHandedOverUnderARunningCommand(t *testing.T) {
	ctx := context.Background()
	a, b := replicas(t, time.Second, 1500*time.Millisecond)
	s, err := a.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o, err := a.Exec(ctx, "alice", s.ID, "sleep 6", ExecOptions{Yield: 100 * time.Millisecond})
	if err != nil || !o.Running {
		t.Fatalf("sleep 6: %+v %v", o, err)
	}
	_, err = b.Exec(ctx, "alice", s.ID, "echo hi", ExecOptions{})
	if errs.CodeOf(err) != errs.Busy || !strings.Contains(err.Error(), "replica-a") {
		t.Fatalf("B's call while A runs a command: %v", err)
	}
	if !a.Running(s.ID) || b.Running(s.ID) {
		t.Fatalf("A runs %v, B runs %v: want A only", a.Running(s.ID), b.Running(s.ID))
	}
	// Nor is it paused from B under A's command: refused, still active.
	if _, err := b.Pause(ctx, "alice", s.ID); errs.CodeOf(err) != errs.Busy {
		t.Fatalf("pause on B while A runs a command: %v", err)
	}
	if st, err := b.store.state(ctx, s.ID); err != nil || st != StateActive {
		t.Fatalf("after the refused pause: %s %v", st, err)
	}
	// A's job ends on A, its output there.
	w, err := a.Wait(ctx, "alice", o.JobID, WaitOptions{})
	if err != nil || w.Running {
		t.Fatalf("the job on A: %+v %v", w, err)
	}
}

// Fencing: once another replica took the lease (its epoch moved on), a
// state this replica's jail still produces is not written, and the call
// says so.
func TestStaleLeaseCannotWriteState(t *testing.T) {
	ctx := context.Background()
	// A long TTL: A's lease stays fresh by its own clock (its first
	// renewal is 6 s away), as for a replica that has not noticed yet.
	a, _ := replicas(t, 30*time.Second, 10*time.Second)
	s, err := a.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(ctx, "alice", s.ID, "export X=kept", ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another replica takes over behind A's back (A was frozen, say):
	// the lease changes hands and its epoch grows.
	if _, err := a.store.db.ExecContext(ctx, `UPDATE session_leases SET holder = 'replica-b', epoch = epoch + 1,
		expires_at = expires_at + 60000 WHERE session_id = ?`, s.ID); err != nil {
		t.Fatal(err)
	}
	o, err := a.Exec(ctx, "alice", s.ID, "export X=stale", ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(o.StateErr, ErrLeaseLost) || !strings.Contains(o.StateErr.Error(), "another replica took the session over") {
		t.Fatalf("a command under a lost lease: state error %v", o.StateErr)
	}
	got, err := a.store.Get(ctx, "alice", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Shell.Env["X"] != "kept" {
		t.Fatalf("the stale replica wrote the state: %+v", got.Shell)
	}
}

// Without a lease configuration (SQLite, one process) nothing is leased:
// no rows, no heartbeat.
func TestNoLeasesWithoutLeaseConfig(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data})
	defer m.Close(ctx)
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Exec(ctx, "alice", s.ID, "true", ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := m.store.db.QueryRowContext(ctx, `SELECT count(*) FROM session_leases`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d lease rows (%v) without leases", n, err)
	}
	if m.ReplicaID() != "" {
		t.Fatalf("replica id %q without leases", m.ReplicaID())
	}
}
