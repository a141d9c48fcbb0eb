package sessions_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/fakerunner"
)

// The session manager does not care which runner it has: the same
// scenarios (create, exec, jobs and yield, pause and resume, restore after
// a restart, idle stop, delete, the usage check) run against the bwrap
// runner and the fake, each passed in Config.NewRunner.
func TestManagerWithEitherRunner(t *testing.T) {
	legs := []struct {
		name string
		new  sessions.NewRunner
	}{
		{"bwrap", sessions.LocalRunner},
		{"fake", fakerunner.New},
	}
	scenarios := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"ExecKeepsCwdAndExports", execKeepsState},
		{"YieldLeavesAJobThatWaitAndKillReach", yieldLeavesAJob},
		{"PauseAndResumeKeepTheState", pauseAndResume},
		{"RestoreAfterARestart", restoreAfterRestart},
		{"IdleStop", idleStop},
		{"DeleteRefusesCommands", deleteRefusesCommands},
		{"UsageCheckRefusesBeforeRunning", usageCheckRefuses},
	}
	for _, leg := range legs {
		t.Run(leg.name, func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					h := newHarness(t, leg.new)
					sc.fn(t, h)
					if h.made.Load() == 0 {
						t.Fatal("the manager never made a runner through Config.NewRunner")
					}
				})
			}
		})
	}
}

// harness is a manager over a real SQLite file whose runners are made by
// one NewRunner, counted.
type harness struct {
	data, user string
	newRunner  sessions.NewRunner
	made       atomic.Int64
	m          *sessions.Manager
}

func newHarness(t *testing.T, newRunner sessions.NewRunner) *harness {
	h := &harness{data: workspaceDir(t), user: "alice"}
	h.newRunner = func(p sandbox.Profile, opts sandbox.Options) (sessions.Runner, error) {
		h.made.Add(1)
		return newRunner(p, opts)
	}
	h.m = h.manager(t, sessions.Config{})
	return h
}

// manager opens another manager on the same database: a restarted server.
func (h *harness) manager(t *testing.T, cfg sessions.Config) *sessions.Manager {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(h.data, "warren.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := sessions.NewStore(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir, cfg.NewRunner = h.data, h.newRunner
	m, err := sessions.NewManager(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func (h *harness) create(t *testing.T) string {
	t.Helper()
	s, err := h.m.Create(context.Background(), h.user, sessions.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

// execDone runs command to its end and requires its state to be saved.
func execDone(t *testing.T, m *sessions.Manager, user, id, command string) sessions.CommandResult {
	t.Helper()
	o, err := m.Exec(context.Background(), user, id, command, sessions.ExecOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	if o.Running || o.StateErr != nil {
		t.Fatalf("%s: running %v, state %v", command, o.Running, o.StateErr)
	}
	return o.Result
}

func execKeepsState(t *testing.T, h *harness) {
	id := h.create(t)
	execDone(t, h.m, h.user, id, "cd /tmp && export A=1")
	if res := execDone(t, h.m, h.user, id, `echo "$A $PWD"`); string(res.Stdout) != "1 /tmp\n" || res.Cwd != "/tmp" {
		t.Fatalf("the second command saw %q in %s", res.Stdout, res.Cwd)
	}
	if !h.m.Running(id) {
		t.Fatal("the session's runner is not running after a command")
	}
}

func yieldLeavesAJob(t *testing.T, h *harness) {
	ctx := context.Background()
	id := h.create(t)
	execDone(t, h.m, h.user, id, "export J=1")
	var progress atomic.Int64
	o, err := h.m.Exec(ctx, h.user, id, "echo go; sleep 30", sessions.ExecOptions{Timeout: time.Minute, Yield: 300 * time.Millisecond,
		Progress: func(_ sessions.Stream, b []byte) { progress.Add(int64(len(b))) }})
	if err != nil || !o.Running || o.JobID == "" {
		t.Fatalf("a command past its yield: %+v %v", o, err)
	}
	if string(o.Result.Stdout) != "go\n" || progress.Load() != 3 {
		t.Fatalf("output so far %q, progress %d bytes", o.Result.Stdout, progress.Load())
	}
	var left *sessions.JobRunningError
	if _, err := h.m.Exec(ctx, h.user, id, "echo queued", sessions.ExecOptions{}); !errors.As(err, &left) || left.Job != o.JobID {
		t.Fatalf("a command behind a job left running: %v, want a JobRunningError naming %s", err, o.JobID)
	}
	if _, err := h.m.Wait(ctx, "mallory", o.JobID, sessions.WaitOptions{}); !errors.Is(err, sessions.ErrJobNotFound) {
		t.Fatalf("another user's wait: %v, want ErrJobNotFound", err)
	}
	if w, err := h.m.Wait(ctx, h.user, o.JobID, sessions.WaitOptions{Yield: 50 * time.Millisecond}); err != nil || !w.Running {
		t.Fatalf("wait with a yield: %+v %v", w, err)
	}
	k, err := h.m.Kill(ctx, h.user, id, "", sessions.WaitOptions{})
	if err != nil || k.Running || !k.Result.Interrupted || k.JobID != o.JobID {
		t.Fatalf("kill: %+v %v", k, err)
	}
	if _, err := h.m.Wait(ctx, h.user, o.JobID, sessions.WaitOptions{}); !errors.Is(err, sessions.ErrJobNotFound) {
		t.Fatalf("a collected job is still found: %v", err)
	}
	if res := execDone(t, h.m, h.user, id, "echo $J"); string(res.Stdout) != "1\n" {
		t.Fatalf("after the kill: %q", res.Stdout)
	}
	if _, err := h.m.Kill(ctx, h.user, id, "", sessions.WaitOptions{}); !errors.Is(err, sessions.ErrNothingRunning) {
		t.Fatalf("kill with nothing running: %v", err)
	}
}

func pauseAndResume(t *testing.T, h *harness) {
	ctx := context.Background()
	id := h.create(t)
	execDone(t, h.m, h.user, id, "cd /tmp && export P=1")
	if _, err := h.m.Pause(ctx, h.user, id); err != nil || h.m.Running(id) {
		t.Fatalf("pause: %v; running %v", err, h.m.Running(id))
	}
	var st *sessions.StateError
	if _, err := h.m.Exec(ctx, h.user, id, "true", sessions.ExecOptions{}); !errors.As(err, &st) {
		t.Fatalf("a command in a paused session: %v, want a StateError", err)
	}
	if _, err := h.m.Resume(ctx, h.user, id); err != nil {
		t.Fatal(err)
	}
	if res := execDone(t, h.m, h.user, id, `echo "$P $PWD"`); string(res.Stdout) != "1 /tmp\n" {
		t.Fatalf("after resume: %q", res.Stdout)
	}
}

func restoreAfterRestart(t *testing.T, h *harness) {
	id := h.create(t)
	execDone(t, h.m, h.user, id, "cd /tmp && export R=1")
	// The first manager is not closed, as after kill -9.
	m2 := h.manager(t, sessions.Config{})
	if res := execDone(t, m2, h.user, id, `echo "$R $PWD"`); string(res.Stdout) != "1 /tmp\n" {
		t.Fatalf("after a restart: %q", res.Stdout)
	}
}

func idleStop(t *testing.T, h *harness) {
	ctx := context.Background()
	m := h.manager(t, sessions.Config{IdleTimeout: time.Nanosecond})
	s, err := m.Create(ctx, h.user, sessions.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	execDone(t, m, h.user, s.ID, "export I=1")
	if n := m.Reap(ctx); n != 1 || m.Running(s.ID) {
		t.Fatalf("reaped %d; running %v", n, m.Running(s.ID))
	}
	if res := execDone(t, m, h.user, s.ID, "echo $I"); string(res.Stdout) != "1\n" {
		t.Fatalf("after an idle stop: %q", res.Stdout)
	}
}

func deleteRefusesCommands(t *testing.T, h *harness) {
	ctx := context.Background()
	id := h.create(t)
	execDone(t, h.m, h.user, id, "true")
	if _, err := h.m.Delete(ctx, h.user, id); err != nil {
		t.Fatal(err)
	}
	if h.m.Running(id) {
		t.Fatal("a deleted session's runner still runs")
	}
	if _, err := h.m.Exec(ctx, h.user, id, "true", sessions.ExecOptions{}); err == nil {
		t.Fatal("a command ran in a deleted session")
	}
}

func usageCheckRefuses(t *testing.T, h *harness) {
	ctx := context.Background()
	id := h.create(t)
	execDone(t, h.m, h.user, id, "export U=before")
	h.m.SetUsageCheck(func(_ context.Context, user, session string) string {
		if user == h.user && session == id {
			return "session " + session + " reached usage threshold \"budget\""
		}
		return ""
	})
	var blocked *sessions.UsageBlockedError
	if _, err := h.m.Exec(ctx, h.user, id, "export U=after", sessions.ExecOptions{}); !errors.As(err, &blocked) || blocked.Session != id {
		t.Fatalf("a command over an enforced threshold: %v, want a UsageBlockedError", err)
	}
	// A session that never ran a command gets no runner for a refused one.
	fresh := h.create(t)
	h.m.SetUsageCheck(func(context.Context, string, string) string { return "user alice reached usage threshold \"budget\"" })
	made := h.made.Load()
	if _, err := h.m.Exec(ctx, h.user, fresh, "true", sessions.ExecOptions{}); !errors.As(err, &blocked) {
		t.Fatalf("a command over an enforced threshold: %v, want a UsageBlockedError", err)
	}
	if h.made.Load() != made || h.m.Running(fresh) {
		t.Fatal("a refused command made or started a runner")
	}
	h.m.SetUsageCheck(nil)
	if res := execDone(t, h.m, h.user, id, "echo $U"); string(res.Stdout) != "before\n" {
		t.Fatalf("the refused command ran: %q", res.Stdout)
	}
}
