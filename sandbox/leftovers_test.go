package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// A fork bomb that returns at once (its processes run on in the
// background) fills the jail's process limit. When the command ends, what
// it left behind is stopped: the next command of the session runs, instead
// of answering "Cannot fork" until one times out. The bomb runs only in a
// jail whose cgroup caps its processes.
func TestForkBombLeftoversAreStopped(t *testing.T) {
	sh, _ := newTestShell(t, func(p *Profile) { p.Limits.PIDs = 48 })
	requireCgroups(t, sh)
	mustRun(t, sh, "mkdir -p /workspace/b && cd /workspace/b && export B=1")
	// Each process of the bomb tries to start two more (`command eval`
	// keeps it alive when a fork fails), then holds its pid blocked on
	// opening a FIFO (a builtin redirection: no fork, no CPU), so the jail
	// stays at its limit after the command has returned.
	mustRun(t, sh, "mkfifo /tmp/hold")
	res := mustRun(t, sh, "f() { command eval 'f &'; command eval 'f &'; read x </tmp/hold; }; f & sleep 1; echo done",
		ExecOptions{Timeout: 20 * time.Second})
	if res.TimedOut || res.ShellRestarted {
		t.Fatalf("bomb: timed out %v restarted %v stdout %q stderr %q", res.TimedOut, res.ShellRestarted, res.Stdout, tail(res.Stderr))
	}
	if !strings.Contains(string(res.Stderr), "limit of 48 processes") {
		t.Errorf("the bomb's result does not say its leftovers were stopped: stderr ends %q", tail(res.Stderr))
	}
	for _, cmd := range []string{"echo ok", "/bin/echo ok | cat", "ls -d /workspace/b | grep -q b && echo ok"} {
		res := mustRun(t, sh, cmd, ExecOptions{Timeout: 10 * time.Second})
		if res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "ok" || res.TimedOut {
			t.Fatalf("%q after the bomb: exit %d timed out %v stdout %q stderr %.300q",
				cmd, res.ExitCode, res.TimedOut, res.Stdout, res.Stderr)
		}
	}
	assertState(t, sh, "/workspace/b", "B", "1")
	// bwrap, the jail's init, the shell and the runner, which still serves.
	if n := len(sh.cg.pids()); n != 4 {
		t.Fatalf("%d processes in the jail's cgroup; want bwrap, its init, the shell and the runner", n)
	}
	pingRunner(t, sh)
}

// pingRunner checks that the jail's runner answers.
func pingRunner(t *testing.T, sh *Shell) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sh.Runner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var res proto.PingResult
	if err := c.Call(ctx, proto.OpPing, proto.PingArgs{}, nil, &res); err != nil || res.PID <= 0 {
		t.Fatalf("the runner after the bomb: %+v %v", res, err)
	}
}

func tail(b []byte) string {
	if len(b) > 300 {
		b = b[len(b)-300:]
	}
	return string(b)
}

// A bomb whose command returns before the jail is full (the usual shape:
// `f &` and nothing else) fills it after its result: the next command
// stops the leftovers before it runs, and runs.
func TestForkBombThatFillsLaterIsStoppedBeforeTheNextCommand(t *testing.T) {
	sh, _ := newTestShell(t, func(p *Profile) { p.Limits.PIDs = 48 })
	requireCgroups(t, sh)
	mustRun(t, sh, "mkfifo /tmp/hold")
	res := mustRun(t, sh, "f() { command eval 'f &'; command eval 'f &'; read x </tmp/hold; }; f & echo started")
	if strings.TrimSpace(string(res.Stdout)) != "started" || res.ShellRestarted {
		t.Fatalf("bomb: stdout %q restarted %v stderr %q", res.Stdout, res.ShellRestarted, tail(res.Stderr))
	}
	// Unless the bomb was fast enough to be caught at the end of its own
	// command, wait until it has filled the jail.
	later := !strings.Contains(string(res.Stderr), "limit of 48 processes")
	t.Logf("the bomb filled the jail after its command: %v", later)
	if later {
		waitFor(t, func() bool { return sh.cg.forkRefusals() > sh.cg.refused })
	}
	res = mustRun(t, sh, "/bin/echo ok | cat", ExecOptions{Timeout: 10 * time.Second})
	if res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "ok" {
		t.Fatalf("after the bomb filled the jail: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, tail(res.Stderr))
	}
	if later && !strings.Contains(string(res.Stderr), "limit of 48 processes") {
		t.Errorf("the result does not say the leftovers were stopped: stderr %q", tail(res.Stderr))
	}
}
