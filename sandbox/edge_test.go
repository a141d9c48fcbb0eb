package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProtocolDescriptorsClosedByTheCommand: a command that closes or
// redirects the descriptors the protocol uses (its own 0, 1 and 2, the
// shell's 6, 7 and 8, the status pipe the init script received on 4) costs
// at most a restart, never a hang or a wrong answer.
func TestProtocolDescriptorsClosedByTheCommand(t *testing.T) {
	sh, _ := newTestShell(t)
	mustRun(t, sh, "mkdir p && cd p && export P=1")
	for _, cmd := range []string{"exec 9>&-", "exec 7>&-", "exec 8>&-", "exec 6<&-", "exec 9>/dev/null", "exec 0</dev/null",
		"exec 0<&-", "exec 1>&- 2>&-", "exec >/dev/null 2>&1", "exec 4>&- 5>&- 3>&-", "exec 2>/dev/null", "exec 2>&1",
		"exec 2>stray; echo lost >&2"} {
		res := mustRun(t, sh, cmd, ExecOptions{Timeout: time.Minute})
		if res.TimedOut || res.Duration > 10*time.Second {
			t.Errorf("%q: hung until %v (timed out %v)", cmd, res.Duration, res.TimedOut)
		}
		assertState(t, sh, "/workspace/p", "P", "1")
		// What the command did to its descriptors was its own: the next
		// one has stdin, stdout and stderr as every command does.
		next := mustRun(t, sh, "read x || echo eof; echo out; echo err >&2")
		if string(next.Stdout) != "eof\nout\n" || string(next.Stderr) != "err\n" {
			t.Errorf("after %q, the next command got stdout %q stderr %q", cmd, next.Stdout, next.Stderr)
		}
	}
}

func TestLargeCommand(t *testing.T) {
	sh, _ := newTestShell(t)
	arg := strings.Repeat("x", 1<<20)
	res := mustRun(t, sh, "printf %s '"+arg+"' | wc -c")
	if strings.TrimSpace(string(res.Stdout)) != "1048576" {
		t.Fatalf("1 MiB command: stdout %q stderr %.200q", res.Stdout, res.Stderr)
	}
}

// TestBackgroundJobsCannotForgeAResult: background jobs that keep writing
// fake status records and exports on every descriptor they hold (dash
// cannot name descriptors above 9, where it keeps its saved copies, and
// programs do not inherit those), while later commands run, change
// neither their exit codes, their directory nor the saved state.
func TestBackgroundJobsCannotForgeAResult(t *testing.T) {
	sh, dir := newTestShell(t)
	mustRun(t, sh, "mkdir -p real && cd real")
	forge := `while [ ! -e /workspace/stop ]; do for fd in 1 2 3 4 5 6 7 8 9; do ` +
		`eval "printf 'export EVIL=1\nW0 0\n/workspace/forged\nW0X\n' >&$fd" 2>/dev/null; done; done`
	mustRun(t, sh, "( "+forge+" ) & ( "+forge+" ) &")
	defer os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644)
	seen := 0 // commands whose output shows the forgers at work
	for i := 0; i < 50 || seen == 0; i++ {
		want := 3 + i%2
		res := mustRun(t, sh, "sleep 0.01; (exit "+strconv.Itoa(want)+")")
		if res.ExitCode != want || res.Cwd != "/workspace/real" {
			t.Fatalf("command %d: exit %d cwd %q, want %d in /workspace/real", i, res.ExitCode, res.Cwd, want)
		}
		if strings.Contains(string(res.Stdout), "W0X") {
			seen++
		}
	}
	if _, ok := sh.State().Env["EVIL"]; ok {
		t.Fatalf("a background job's fake record reached the saved state: %v", sh.State().Env)
	}
}
