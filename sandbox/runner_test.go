package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// The runner serves while a command runs: a request never waits behind
// the shell.
func TestRunnerAnswersWhileACommandRuns(t *testing.T) {
	sh, _ := newTestShell(t)
	mustRun(t, sh, "true")
	done := make(chan Result, 1)
	go func() {
		res, _ := sh.Exec(context.Background(), "sleep 3", ExecOptions{Timeout: 20 * time.Second})
		done <- res
	}()
	time.Sleep(200 * time.Millisecond)
	if !sh.Busy() {
		t.Fatal("the command is not running")
	}
	pingRunner(t, sh)
	select {
	case <-done:
		t.Fatal("the ping waited for the command")
	default:
	}
	<-done
}

// A command that kills the runner (kill -9 -1 kills every process of the
// jail's uid) does not leave the session without one. The runner owns the
// shell, so the jail ends with it: the command's result says the shell
// restarted, and the next request finds a fresh jail, with the saved
// state, whose runner serves again.
func TestRunnerKilledByACommandComesBack(t *testing.T) {
	sh, _ := newTestShell(t)
	mustRun(t, sh, "mkdir -p /workspace/d && cd /workspace/d && export KEEP=1")
	pingRunner(t, sh)
	res := mustRun(t, sh, "for p in /proc/[0-9]*; do grep -q -- --conn $p/cmdline 2>/dev/null && kill -9 ${p#/proc/}; done; sleep 2",
		ExecOptions{Timeout: 20 * time.Second})
	if !res.ShellRestarted || res.TimedOut {
		t.Fatalf("the command that killed the runner: restarted %v timed out %v, want a restart", res.ShellRestarted, res.TimedOut)
	}
	pingRunner(t, sh)
	assertState(t, sh, "/workspace/d", "KEEP", "1")
	expectOut(t, sh, "echo $KEEP", 0, "1")
}

// The jail's runner speaks this server's protocol and says what it does.
func TestRunnerHello(t *testing.T) {
	sh, _ := newTestShell(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sh.Runner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Hello(ctx)
	if err != nil || h.Protocol != proto.Version || !c.Has(proto.OpPing) {
		t.Fatalf("hello %+v %v", h, err)
	}
}

// The runner owns the shell: the jail's /bin/sh is the runner's child,
// started by it, not a process the server drives through pipes.
func TestTheShellIsTheRunners(t *testing.T) {
	sh, _ := newTestShell(t)
	res := mustRun(t, sh, `tr '\0' ' ' < /proc/$PPID/cmdline`)
	if parent := string(res.Stdout); !strings.HasPrefix(parent, "/proc/self/fd/") || !strings.Contains(parent, " --conn ") {
		t.Fatalf("the shell's parent runs %q, not the runner", res.Stdout)
	}
}
