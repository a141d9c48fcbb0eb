package sessions

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// jailData returns a data directory a jail running as another uid (tests
// run as root in CI) can reach: t.TempDir's parent is 0700.
func jailData(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap is not installed: run 'just deps' (CI installs it; these tests need real jails)")
	}
	d := t.TempDir()
	if err := os.Chmod(filepath.Dir(d), 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// run executes command in user's session the way shell_exec does
// (Manager.Exec: open, queue, run, save the state) and waits for its end.
func run(t testing.TB, m *Manager, user, id, command string) CommandResult {
	t.Helper()
	o, err := m.Exec(context.Background(), user, id, command, ExecOptions{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	if o.StateErr != nil {
		t.Fatal(o.StateErr)
	}
	return o.Result
}

func TestShellStateSurvivesARestartAndIdleStops(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	db := openDB(t, data)
	m := newManager(t, db, Config{DataDir: data, IdleTimeout: time.Hour})
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run(t, m, "alice", s.ID, "mkdir -p sub && cd sub && export A=1")
	if !m.Running(s.ID) {
		t.Fatal("the jail is not running after a command")
	}
	// Idle: nothing stops before the timeout; after it, the jail stops and
	// the next command finds the same place.
	if n := m.Reap(ctx); n != 0 {
		t.Fatalf("reaped %d shells before the idle timeout", n)
	}
	m.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if n := m.Reap(ctx); n != 1 || m.Running(s.ID) {
		t.Fatalf("reaped %d; running %v", n, m.Running(s.ID))
	}
	m.now = time.Now
	if res := run(t, m, "alice", s.ID, `echo "$PWD $A"`); string(res.Stdout) != "/workspace/sub 1\n" {
		t.Fatalf("after an idle stop: %q", res.Stdout)
	}
	// A second manager on the same database is a restarted server; the
	// first one is not closed, as after kill -9 (its jail dies with the test).
	m2 := newManager(t, openDB(t, data), Config{DataDir: data})
	t.Cleanup(func() { m.Close(ctx); m2.Close(ctx) })
	if res := run(t, m2, "alice", s.ID, `echo "$PWD $A"`); string(res.Stdout) != "/workspace/sub 1\n" {
		t.Fatalf("after a restart: %q", res.Stdout)
	}
}

func TestRunningShellCapStopsTheLeastRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, MaxRunningShells: 2})
	t.Cleanup(func() { m.Close(ctx) })
	var ids []string
	for range 3 {
		s, err := m.Create(ctx, "alice", CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	run(t, m, "alice", ids[0], "export N=0")
	run(t, m, "alice", ids[1], "true")
	run(t, m, "alice", ids[2], "true")
	if m.Running(ids[0]) || !m.Running(ids[1]) || !m.Running(ids[2]) || m.RunningShells() != 2 {
		t.Fatalf("running: %v %v %v", m.Running(ids[0]), m.Running(ids[1]), m.Running(ids[2]))
	}
	if res := run(t, m, "alice", ids[0], "echo $N"); string(res.Stdout) != "0\n" || m.Running(ids[1]) {
		t.Fatalf("the stopped shell came back as %q; LRU running %v", res.Stdout, m.Running(ids[1]))
	}
}

func TestPauseStopsTheShellAndArchiveRefusesToStartIt(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data})
	t.Cleanup(func() { m.Close(ctx) })
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run(t, m, "alice", s.ID, "cd /tmp && export P=1 && echo hi > /workspace/a.txt")
	if _, err := m.Pause(ctx, "alice", s.ID); err != nil || m.Running(s.ID) {
		t.Fatalf("pause: %v; running %v", err, m.Running(s.ID))
	}
	if _, err := m.Resume(ctx, "alice", s.ID); err != nil {
		t.Fatal(err)
	}
	if res := run(t, m, "alice", s.ID, `echo "$PWD $P"`); string(res.Stdout) != "/tmp 1\n" {
		t.Fatalf("after resume: %q", res.Stdout)
	}
	if _, err := m.Archive(ctx, "alice", s.ID); err != nil || m.Running(s.ID) {
		t.Fatalf("archive: %v; running %v", err, m.Running(s.ID))
	}
	// Even a shell object built for the archived session binds read-only.
	sh, err := m.Shell(s)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sh.Exec(ctx, "echo no > /workspace/a.txt", RunOptions{Timeout: 10 * time.Second})
	if err != nil || res.ExitCode == 0 {
		t.Fatalf("write in an archived jail: %+v %v", res, err)
	}
}
