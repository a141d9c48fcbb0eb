package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox/runner"
)

func TestStatePersistsBetweenCommands(t *testing.T) {
	sh, _ := newTestShell(t)
	mustRun(t, sh, "mkdir -p sub/deeper && cd sub && export A='it'\\''s\ntwo lines'")
	assertState(t, sh, "/workspace/sub", "A", "it's\ntwo lines")
	if st := sh.State(); st.Cwd != "/workspace/sub" || st.Env["A"] != "it's\ntwo lines" {
		t.Fatalf("State() = %+v", st)
	}
}

func TestSyntaxErrorsKeepTheShell(t *testing.T) {
	sh, _ := newTestShell(t)
	mustRun(t, sh, "mkdir d && cd d && export KEEP=1")
	for _, cmd := range []string{`echo "hello`, `(echo a`, "if true; then", "echo 'unterminated"} {
		res := mustRun(t, sh, cmd)
		if res.ExitCode != 2 || len(res.Stderr) == 0 || res.ShellRestarted {
			t.Errorf("%q: exit %d stderr %q restarted %v; want exit 2 with the shell's error", cmd, res.ExitCode, res.Stderr, res.ShellRestarted)
		}
		assertState(t, sh, "/workspace/d", "KEEP", "1")
	}
	// dash ends an unterminated heredoc at the end of the command text, as
	// bash does with a warning: the body is the rest of the command.
	res := mustRun(t, sh, "cat <<EOF\nno end")
	if res.ShellRestarted || string(res.Stdout) != "no end" {
		t.Errorf("unterminated heredoc: stdout %q restarted %v", res.Stdout, res.ShellRestarted)
	}
	assertState(t, sh, "/workspace/d", "KEEP", "1")
}

func TestStdinReadersEndAtOnce(t *testing.T) {
	sh, _ := newTestShell(t)
	for _, cmd := range []string{"cat", "read x", "python3", "head -c 10", "sh"} {
		res := mustRun(t, sh, cmd, ExecOptions{Timeout: 20 * time.Second})
		if res.TimedOut || res.ShellRestarted {
			t.Errorf("%q: timed out %v restarted %v: it must read EOF", cmd, res.TimedOut, res.ShellRestarted)
		}
	}
	expectOut(t, sh, "echo still here", 0, "still here")
}

func TestOutputIsExact(t *testing.T) {
	sh, _ := newTestShell(t)
	if res := mustRun(t, sh, "printf abc"); string(res.Stdout) != "abc" {
		t.Errorf("printf abc: %q", res.Stdout)
	}
	if res := mustRun(t, sh, `printf 'a\000b\377c'`); !bytes.Equal(res.Stdout, []byte("a\x00b\xffc")) {
		t.Errorf("binary output: %q", res.Stdout)
	}
	res := mustRun(t, sh, "echo out; echo err >&2; printf 'no newline' >&2")
	if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\nno newline" {
		t.Errorf("streams mixed: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	// Text that looks like an old protocol sentinel is just output.
	res = mustRun(t, sh, "echo 'W123S W123E __END__ 0'")
	if string(res.Stdout) != "W123S W123E __END__ 0\n" {
		t.Errorf("marker-like output: %q", res.Stdout)
	}
}

func TestLargeOutputIsCappedAndCounted(t *testing.T) {
	sh, _ := newTestShell(t)
	cases := []struct {
		cmd           string
		out, err      int64
		wantTruncated bool
	}{
		{"head -c 1048576 /dev/zero | tr '\\0' x", 1 << 20, 0, true},
		{"head -c 104857600 /dev/zero", 100 << 20, 0, true},
		{"head -c 5242880 /dev/zero | tr '\\0' e >&2", 0, 5 << 20, true},
		{"head -c 5242880 /dev/zero >&2 & head -c 5242880 /dev/zero; wait", 5 << 20, 5 << 20, true},
		{"head -c 1000 /dev/zero", 1000, 0, false},
	}
	for _, c := range cases {
		res := mustRun(t, sh, c.cmd, ExecOptions{Timeout: 60 * time.Second, MaxOutput: 64 << 10})
		if res.StdoutBytes != c.out || res.StderrBytes != c.err || res.Truncated != c.wantTruncated {
			t.Errorf("%q: stdout %d stderr %d truncated %v; want %d %d %v", c.cmd,
				res.StdoutBytes, res.StderrBytes, res.Truncated, c.out, c.err, c.wantTruncated)
		}
		if len(res.Stdout) > 65<<10 || len(res.Stderr) > 65<<10 {
			t.Errorf("%q: kept %d/%d bytes, cap is 64 KiB", c.cmd, len(res.Stdout), len(res.Stderr))
		}
		if res.ExitCode != 0 || res.TimedOut {
			t.Errorf("%q: exit %d timed out %v", c.cmd, res.ExitCode, res.TimedOut)
		}
	}
}

func TestShellDeathRestartsWithState(t *testing.T) {
	sh, _ := newTestShell(t)
	for _, c := range []struct {
		cmd  string
		code int
	}{{"exit 3", 3}, {"kill -9 $$", 137}, {"set -e; false", 1}, {"exec true", 0}} {
		mustRun(t, sh, "mkdir -p /workspace/s && cd /workspace/s && export V=kept")
		res := mustRun(t, sh, c.cmd)
		if res.ExitCode != c.code || !res.ShellRestarted {
			t.Errorf("%q: exit %d restarted %v; want %d and a restart", c.cmd, res.ExitCode, res.ShellRestarted, c.code)
		}
		assertState(t, sh, "/workspace/s", "V", "kept")
	}
}

func TestOutputBeforeDeathIsKept(t *testing.T) {
	sh, _ := newTestShell(t)
	res := mustRun(t, sh, "echo last words; echo on stderr >&2; exit 4")
	if res.ExitCode != 4 || string(res.Stdout) != "last words\n" || string(res.Stderr) != "on stderr\n" {
		t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

func TestRedirectionsAreRestored(t *testing.T) {
	sh, _ := newTestShell(t)
	mustRun(t, sh, "exec >/dev/null 2>&1")
	expectOut(t, sh, "echo visible", 0, "visible")
	mustRun(t, sh, "exec 1>&-")
	expectOut(t, sh, "echo again", 0, "again")
}

func TestTimeoutKillsCommandNotShell(t *testing.T) {
	sh, _ := newTestShell(t)
	mustRun(t, sh, "mkdir t && cd t && export T=1")
	res := mustRun(t, sh, "echo before; sleep 1000", ExecOptions{Timeout: 2 * time.Second})
	if !res.TimedOut || res.ShellRestarted || string(res.Stdout) != "before\n" {
		t.Fatalf("timed out %v restarted %v stdout %q", res.TimedOut, res.ShellRestarted, res.Stdout)
	}
	if res.Duration < 2*time.Second {
		t.Fatalf("returned after %v, before the 2s timeout", res.Duration)
	}
	assertState(t, sh, "/workspace/t", "T", "1")
}

func TestBusyLoopInShellRestartsJail(t *testing.T) {
	sh, _ := newTestShell(t)
	mustRun(t, sh, "mkdir l && cd l && export L=1")
	res := mustRun(t, sh, "while :; do :; done", ExecOptions{Timeout: time.Second})
	if !res.TimedOut || !res.ShellRestarted {
		t.Fatalf("timed out %v restarted %v", res.TimedOut, res.ShellRestarted)
	}
	assertState(t, sh, "/workspace/l", "L", "1")
	res = mustRun(t, sh, "exec sleep 100", ExecOptions{Timeout: time.Second})
	if !res.TimedOut || !res.ShellRestarted {
		t.Fatalf("exec sleep: timed out %v restarted %v", res.TimedOut, res.ShellRestarted)
	}
	assertState(t, sh, "/workspace/l", "L", "1")
}

func TestCancelInterruptsCommand(t *testing.T) {
	sh, _ := newTestShell(t)
	mustRun(t, sh, "export C=1")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	res, err := sh.Exec(ctx, "sleep 100", ExecOptions{Timeout: time.Minute})
	if err != nil || !res.Interrupted || res.TimedOut || res.ShellRestarted {
		t.Fatalf("err %v interrupted %v timed out %v restarted %v", err, res.Interrupted, res.TimedOut, res.ShellRestarted)
	}
	assertState(t, sh, "/workspace", "C", "1")
}

func TestBackgroundJobsDoNotBlock(t *testing.T) {
	sh, _ := newTestShell(t)
	mustRun(t, sh, "sleep 100 &")
	for i := 0; i < 3; i++ {
		res := mustRun(t, sh, "echo next", ExecOptions{Timeout: 10 * time.Second})
		if res.TimedOut || string(res.Stdout) != "next\n" {
			t.Fatalf("after a background job: timed out %v stdout %q", res.TimedOut, res.Stdout)
		}
	}
	// A timeout kills the command, not the earlier background job.
	mustRun(t, sh, "sleep 1000", ExecOptions{Timeout: time.Second})
	expectOut(t, sh, "ps -eo args | grep -c '^sleep 100$'", 0, "1")
}

func TestBackgroundChatterIsNotAttributed(t *testing.T) {
	sh, dir := newTestShell(t)
	mustRun(t, sh, "(sleep 0.2; echo LATE; touch /workspace/late-done) &")
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(dir, "late-done")); return err == nil })
	expectOut(t, sh, "echo mine", 0, "mine")
}

func TestConcurrentExecIsSerialized(t *testing.T) {
	sh, _ := newTestShell(t)
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cmd := fmt.Sprintf("for n in 1 2 3; do echo %d-$n; sleep 0.05; done; export LAST=%d", i, i)
			res, err := sh.Exec(context.Background(), cmd, ExecOptions{Timeout: 30 * time.Second})
			want := fmt.Sprintf("%d-1\n%d-2\n%d-3\n", i, i, i)
			if err != nil || string(res.Stdout) != want {
				errs <- fmt.Errorf("command %d: err %v stdout %q", i, err, res.Stdout)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestNoWaitReportsBusy(t *testing.T) {
	sh, _ := newTestShell(t)
	go sh.Exec(context.Background(), "sleep 2", ExecOptions{})
	waitFor(t, sh.Busy)
	if _, err := sh.Exec(context.Background(), "echo hi", ExecOptions{NoWait: true}); err != ErrBusy {
		t.Fatalf("err = %v, want ErrBusy", err)
	}
}

func TestStreamingCallback(t *testing.T) {
	sh, _ := newTestShell(t)
	mustRun(t, sh, "true") // the jail is up: time below is the command's
	var mu sync.Mutex
	streams := map[Stream]string{}
	var firstChunk time.Duration
	start := time.Now()
	res := mustRun(t, sh, "echo one; sleep 0.5; echo two >&2; sleep 0.5; echo three", ExecOptions{
		Timeout: 10 * time.Second,
		OnOutput: func(s Stream, p []byte) {
			mu.Lock()
			if len(streams) == 0 {
				firstChunk = time.Since(start)
			}
			streams[s] += string(p)
			mu.Unlock()
		},
	})
	if streams[Stdout] != "one\nthree\n" || streams[Stderr] != "two\n" || string(res.Stdout) != "one\nthree\n" {
		t.Fatalf("streamed %q, stdout %q", streams, res.Stdout)
	}
	// Output arrives while the command runs, not with its result.
	if firstChunk > res.Duration-500*time.Millisecond {
		t.Fatalf("first chunk after %v of a %v command: not streamed", firstChunk, res.Duration)
	}
}

func TestBadInput(t *testing.T) {
	sh, dir := newTestShell(t)
	for cmd, want := range map[string]error{"echo a\x00b": ErrNULInCommand, "": ErrEmptyCommand, "  \n\t": ErrEmptyCommand} {
		if _, err := sh.Exec(context.Background(), cmd, ExecOptions{}); err != want {
			t.Errorf("Exec(%q) = %v, want %v", cmd, err, want)
		}
	}
	if sh.Running() {
		t.Error("rejected commands started a jail")
	}
	for _, ws := range []string{dir + "/missing", "relative/dir"} {
		if _, err := NewShell(DefaultProfile(ws), Options{}); err == nil {
			t.Errorf("NewShell(%q) accepted a bad workspace", ws)
		}
	}
	mustRun(t, sh, "echo x > file")
	_, err := NewShell(DefaultProfile(dir+"/file"), Options{})
	if err == nil || !strings.Contains(err.Error(), "is a file") {
		t.Errorf("workspace that is a file: %v", err)
	}
}

func TestShellKilledBetweenCommandsIsRestarted(t *testing.T) {
	sh, _ := newTestShell(t)
	mustRun(t, sh, "cd /tmp; export K=1; (sleep 0.2; kill -9 $$) >/dev/null 2>&1 &")
	waitFor(t, func() bool { return !sh.Running() })
	res := mustRun(t, sh, "echo back")
	if string(res.Stdout) != "back\n" || !res.ShellRestarted {
		t.Fatalf("stdout %q restarted %v", res.Stdout, res.ShellRestarted)
	}
	assertState(t, sh, "/tmp", "K", "1")
}

// TestStateFollowsEveryChange: the saved state is the shell's after every
// command, whether the command changed it or not, and after a restart.
func TestStateFollowsEveryChange(t *testing.T) {
	sh, _ := newTestShell(t)
	steps := []struct {
		cmd  string
		want string // A's saved value; "-" when A is not exported
	}{
		{"export A=1", "1"},
		{"true", "1"},
		{"unset A", "-"},
		{"echo unchanged", "-"},
		{"set -a; A=2; set +a", "2"},
		{"f() { export A=3; }; f", "3"},
		{"A='x\ny'", "x\ny"},
		{"kill -9 $$", "x\ny"},
		{"true", "x\ny"},
		{"export A=4", "4"},
	}
	for _, s := range steps {
		mustRun(t, sh, s.cmd)
		got, ok := sh.State().Env["A"]
		if !ok {
			got = "-"
		}
		if got != s.want {
			t.Fatalf("after %q: saved A = %q, want %q", s.cmd, got, s.want)
		}
	}
}

// TestEndedJobIsReapedBeforeTheNextCommand: a background job killed while
// the shell waited for a command is gone for that command (kill -0 fails),
// as it would be in a terminal.
func TestEndedJobIsReapedBeforeTheNextCommand(t *testing.T) {
	sh, _ := newTestShell(t)
	mustRun(t, sh, "sleep 100 & export P=$!")
	kids := runner.ShellChildren(sh.jail.shell())
	if len(kids) != 1 {
		t.Fatalf("shell children %v, want the one job", kids)
	}
	if err := syscall.Kill(kids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", kids[0]))
		return err != nil || strings.Contains(string(st), ") Z ")
	})
	expectOut(t, sh, "kill -0 $P 2>/dev/null && echo alive || echo gone", 0, "gone")
}

// TestStateVersionMovesOnlyWithTheState: a command that changes neither
// cwd nor exports leaves StateVersion as it was; cd and export move it.
func TestStateVersionMovesOnlyWithTheState(t *testing.T) {
	sh, _ := newTestShell(t)
	mustRun(t, sh, "true")
	v := sh.StateVersion()
	for _, c := range []struct {
		cmd   string
		moves bool
	}{{"echo hi", false}, {"mkdir -p d && cd d", true}, {"ls", false}, {"export V=1", true}, {"true", false}, {"export V=1", false}, {"cd /workspace", true}} {
		mustRun(t, sh, c.cmd)
		now := sh.StateVersion()
		if moved := now != v; moved != c.moves {
			t.Errorf("%q: StateVersion moved %v, want %v", c.cmd, moved, c.moves)
		}
		v = now
	}
}

// TestDetachLeavesTheCommandRunning: Exec stops waiting at DetachAt,
// returns ErrDetached, and the command goes on holding the shell; its
// result comes to Detached, and the shell then runs the next command. A
// command that ends before DetachAt is answered as usual.
func TestDetachLeavesTheCommandRunning(t *testing.T) {
	sh, _ := newTestShell(t)
	ctx := context.Background()
	res, err := sh.Exec(ctx, "echo quick", ExecOptions{DetachAt: time.Now().Add(10 * time.Second), Detached: func(Result, error) {
		t.Error("a quick command was detached")
	}})
	if err != nil || string(res.Stdout) != "quick\n" {
		t.Fatalf("quick command: %v %+v", err, res)
	}
	got := make(chan Result, 1)
	_, err = sh.Exec(ctx, "sleep 0.5; echo slow; cd /tmp", ExecOptions{DetachAt: time.Now().Add(100 * time.Millisecond),
		Detached: func(r Result, err error) {
			if err != nil {
				t.Error(err)
			}
			got <- r
		}})
	if err != ErrDetached {
		t.Fatalf("slow command: error %v, want ErrDetached", err)
	}
	if !sh.Busy() {
		t.Fatal("the shell is free while the detached command runs")
	}
	r := <-got
	if string(r.Stdout) != "slow\n" || r.ExitCode != 0 || r.Cwd != "/tmp" {
		t.Fatalf("detached result %+v", r)
	}
	expectOut(t, sh, "pwd", 0, "/tmp")
}
