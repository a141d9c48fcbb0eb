// Package runnersuite is the conformance suite of sessions.Runner: what the
// session manager relies on from any runner, checked the same way against
// each of them (the bwrap jail on this host, the fake of the tests, and a
// runner reached over the network, each one constructor).
package runnersuite

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/sessions"
)

// New makes a fresh runner that starts from the saved state st; it is
// closed by the suite. A runner over the network is one more New.
type New func(t *testing.T, st sessions.ShellState) sessions.Runner

// Run runs every conformance test against the runners newRunner makes.
func Run(t *testing.T, newRunner New) {
	tests := []struct {
		name string
		fn   func(*testing.T, New)
	}{
		{"OutputAndExitStatus", outputAndExitStatus},
		{"CwdAndExportsPersist", cwdAndExportsPersist},
		{"StartsFromTheSavedState", startsFromTheSavedState},
		{"OutputStreamsAsItIsProduced", outputStreams},
		{"TimeoutKillsTheCommandNotTheShell", timeoutKillsTheCommand},
		{"CancelInterruptsTheCommandNotTheShell", cancelInterruptsTheCommand},
		{"NoWaitRefusesWhileBusy", noWaitRefusesWhileBusy},
		{"DetachHandsTheResultOver", detachHandsTheResultOver},
		{"ExitRestartsTheShellWithItsState", exitRestartsTheShell},
		{"StopKeepsTheState", stopKeepsTheState},
		{"CloseRefusesCommands", closeRefusesCommands},
		{"EmptyCommandIsRefused", emptyCommandIsRefused},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newRunner) })
	}
}

// start makes a runner closed at the end of the test.
func start(t *testing.T, newRunner New, st sessions.ShellState) sessions.Runner {
	t.Helper()
	r := newRunner(t, st)
	t.Cleanup(func() { r.Close() })
	return r
}

// run runs command and fails the test when the runner could not.
func run(t *testing.T, r sessions.Runner, command string) sessions.CommandResult {
	t.Helper()
	res, err := r.Exec(context.Background(), command, sessions.RunOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	return res
}

func outputAndExitStatus(t *testing.T, newRunner New) {
	r := start(t, newRunner, sessions.ShellState{})
	if res := run(t, r, "echo hello"); string(res.Stdout) != "hello\n" || res.ExitCode != 0 || res.StdoutBytes != 6 {
		t.Fatalf("echo hello: %+v", res)
	}
	if res := run(t, r, "echo oops >&2; false"); string(res.Stderr) != "oops\n" || res.ExitCode != 1 || len(res.Stdout) != 0 {
		t.Fatalf("a failing command: %+v", res)
	}
	if res := run(t, r, "false && echo never"); res.ExitCode != 1 || len(res.Stdout) != 0 {
		t.Fatalf("&& after a failure: %+v", res)
	}
}

func cwdAndExportsPersist(t *testing.T, newRunner New) {
	r := start(t, newRunner, sessions.ShellState{})
	v := r.StateVersion()
	res := run(t, r, "cd /tmp && export GREETING=hi")
	if res.Cwd != "/tmp" {
		t.Fatalf("cwd after cd /tmp: %q", res.Cwd)
	}
	if res := run(t, r, `echo "$GREETING $PWD"`); string(res.Stdout) != "hi /tmp\n" {
		t.Fatalf("the next command saw %q, want %q", res.Stdout, "hi /tmp\n")
	}
	st := r.State()
	if st.Cwd != "/tmp" || st.Env["GREETING"] != "hi" {
		t.Fatalf("State() = %+v", st)
	}
	if r.StateVersion() == v {
		t.Fatal("StateVersion did not change with the state")
	}
}

func startsFromTheSavedState(t *testing.T, newRunner New) {
	r := start(t, newRunner, sessions.ShellState{Cwd: "/tmp", Env: map[string]string{"SAVED": "yes"}})
	if res := run(t, r, `echo "$SAVED $PWD"`); string(res.Stdout) != "yes /tmp\n" {
		t.Fatalf("a runner started from a saved state printed %q", res.Stdout)
	}
}

func outputStreams(t *testing.T, newRunner New) {
	r := start(t, newRunner, sessions.ShellState{})
	var mu sync.Mutex
	got := map[sessions.Stream]string{}
	res, err := r.Exec(context.Background(), "echo out; echo err >&2", sessions.RunOptions{Timeout: time.Minute,
		OnOutput: func(s sessions.Stream, chunk []byte) {
			mu.Lock()
			got[s] += string(chunk)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got[sessions.Stdout] != "out\n" || got[sessions.Stderr] != "err\n" {
		t.Fatalf("streamed %q", got)
	}
	if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("result %+v", res)
	}
}

func timeoutKillsTheCommand(t *testing.T, newRunner New) {
	r := start(t, newRunner, sessions.ShellState{})
	run(t, r, "export KEPT=1")
	res, err := r.Exec(context.Background(), "sleep 30", sessions.RunOptions{Timeout: 200 * time.Millisecond})
	if err != nil || !res.TimedOut || res.ExitCode == 0 {
		t.Fatalf("sleep 30 with a timeout: %+v %v", res, err)
	}
	if res := run(t, r, "echo $KEPT"); string(res.Stdout) != "1\n" {
		t.Fatalf("after a timeout the shell lost its exports: %q", res.Stdout)
	}
}

// started runs command (which prints "go" first) in the background and
// returns once it printed it, with its result's channel.
func started(t *testing.T, r sessions.Runner, ctx context.Context, command string, opts sessions.RunOptions) <-chan sessions.CommandResult {
	t.Helper()
	printed := make(chan struct{})
	var once sync.Once
	opts.OnOutput = func(s sessions.Stream, chunk []byte) {
		if strings.Contains(string(chunk), "go") {
			once.Do(func() { close(printed) })
		}
	}
	if opts.Timeout == 0 {
		opts.Timeout = time.Minute
	}
	out := make(chan sessions.CommandResult, 1)
	go func() {
		res, err := r.Exec(ctx, command, opts)
		if err != nil && !errors.Is(err, sessions.ErrDetached) {
			t.Errorf("%s: %v", command, err)
		}
		out <- res
	}()
	select {
	case <-printed:
	case res := <-out:
		t.Fatalf("%s ended before it printed go: %+v", command, res)
	}
	return out
}

func cancelInterruptsTheCommand(t *testing.T, newRunner New) {
	r := start(t, newRunner, sessions.ShellState{})
	run(t, r, "cd /tmp")
	ctx, cancel := context.WithCancel(context.Background())
	done := started(t, r, ctx, "echo go; sleep 30", sessions.RunOptions{})
	cancel()
	if res := <-done; !res.Interrupted || res.ExitCode == 0 {
		t.Fatalf("a cancelled command: %+v", res)
	}
	if res := run(t, r, "pwd"); string(res.Stdout) != "/tmp\n" {
		t.Fatalf("after an interrupt: %q", res.Stdout)
	}
}

func noWaitRefusesWhileBusy(t *testing.T, newRunner New) {
	r := start(t, newRunner, sessions.ShellState{})
	ctx, cancel := context.WithCancel(context.Background())
	done := started(t, r, ctx, "echo go; sleep 30", sessions.RunOptions{})
	if !r.Busy() {
		t.Error("Busy() is false while a command runs")
	}
	if _, err := r.Exec(context.Background(), "echo no", sessions.RunOptions{NoWait: true}); !errors.Is(err, sessions.ErrRunnerBusy) {
		t.Errorf("NoWait while busy: %v, want ErrRunnerBusy", err)
	}
	cancel()
	<-done
	if res := run(t, r, "echo free"); string(res.Stdout) != "free\n" {
		t.Fatalf("after the busy command: %q", res.Stdout)
	}
}

func detachHandsTheResultOver(t *testing.T, newRunner New) {
	r := start(t, newRunner, sessions.ShellState{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	handed := make(chan sessions.CommandResult, 1)
	res, err := r.Exec(ctx, "echo go; sleep 30", sessions.RunOptions{Timeout: time.Minute, DetachAt: time.Now().Add(100 * time.Millisecond),
		Detached: func(res sessions.CommandResult, err error) {
			if err != nil {
				t.Errorf("detached result: %v", err)
			}
			handed <- res
		}})
	if !errors.Is(err, sessions.ErrDetached) {
		t.Fatalf("a command running past DetachAt: %+v %v, want ErrDetached", res, err)
	}
	cancel() // the command's ctx still rules it
	if res := <-handed; !res.Interrupted {
		t.Fatalf("the detached command's result: %+v", res)
	}
}

func exitRestartsTheShell(t *testing.T, newRunner New) {
	r := start(t, newRunner, sessions.ShellState{})
	run(t, r, "cd /tmp && export E=1")
	exit := run(t, r, "exit 7")
	if exit.ExitCode != 7 {
		t.Fatalf("exit 7: %+v", exit)
	}
	next := run(t, r, `echo "$E $PWD"`)
	if string(next.Stdout) != "1 /tmp\n" {
		t.Fatalf("after exit the new shell printed %q, want the same cwd and exports", next.Stdout)
	}
	if !exit.ShellRestarted && !next.ShellRestarted {
		t.Fatalf("neither the exit nor the next command says the shell restarted: %+v, %+v", exit, next)
	}
}

func stopKeepsTheState(t *testing.T, newRunner New) {
	r := start(t, newRunner, sessions.ShellState{})
	run(t, r, "export X=kept")
	if !r.Running() {
		t.Fatal("Running() is false after a command")
	}
	r.Stop()
	if r.Running() {
		t.Fatal("Running() is true after Stop")
	}
	if res := run(t, r, "echo $X"); string(res.Stdout) != "kept\n" || !r.Running() {
		t.Fatalf("after Stop: %q, running %v", res.Stdout, r.Running())
	}
}

func closeRefusesCommands(t *testing.T, newRunner New) {
	r := start(t, newRunner, sessions.ShellState{})
	run(t, r, "true")
	r.Close()
	if _, err := r.Exec(context.Background(), "echo", sessions.RunOptions{}); !errors.Is(err, sessions.ErrRunnerClosed) {
		t.Fatalf("Exec after Close: %v, want ErrRunnerClosed", err)
	}
}

func emptyCommandIsRefused(t *testing.T, newRunner New) {
	r := start(t, newRunner, sessions.ShellState{})
	for _, c := range []string{"", "  \n\t", "echo a\x00b"} {
		if _, err := r.Exec(context.Background(), c, sessions.RunOptions{}); !errors.Is(err, sessions.ErrEmptyCommand) && !errors.Is(err, sessions.ErrNULInCommand) {
			t.Errorf("Exec(%q): %v, want ErrEmptyCommand or ErrNULInCommand", c, err)
		}
	}
}
