package sandbox

import (
	"strings"
	"testing"
	"time"
)

// A command that ends the shell keeps everything the shell wrote before it
// died: what its EXIT trap prints (on stdout or stderr) included, whether the
// shell is the first of the session or one started after a restart.
func TestExitTrapOutputIsKept(t *testing.T) {
	const cmd = `trap 'echo TRAPPED; echo TRAPPED-ERR >&2' EXIT; echo before; exit 0`
	check := func(t *testing.T, sh *Shell) {
		t.Helper()
		res := mustRun(t, sh, cmd)
		if res.ExitCode != 0 || !res.ShellRestarted ||
			string(res.Stdout) != "before\nTRAPPED\n" || string(res.Stderr) != "TRAPPED-ERR\n" {
			t.Fatalf("exit %d restarted %v stdout %q stderr %q; want exit 0, a restart, "+
				"stdout %q, stderr %q", res.ExitCode, res.ShellRestarted, res.Stdout, res.Stderr,
				"before\nTRAPPED\n", "TRAPPED-ERR\n")
		}
		expectOut(t, sh, "echo next", 0, "next")
	}
	t.Run("first shell", func(t *testing.T) {
		sh, _ := newTestShell(t)
		check(t, sh)
	})
	t.Run("after a restart", func(t *testing.T) {
		sh, _ := newTestShell(t)
		res := mustRun(t, sh, "exec sleep 100", ExecOptions{Timeout: time.Second})
		if !res.TimedOut || !res.ShellRestarted {
			t.Fatalf("exec sleep: timed out %v restarted %v", res.TimedOut, res.ShellRestarted)
		}
		check(t, sh)
	})
	t.Run("twice in a row", func(t *testing.T) {
		sh, _ := newTestShell(t)
		check(t, sh)
		check(t, sh)
	})
	t.Run("trap output only", func(t *testing.T) {
		sh, _ := newTestShell(t)
		res := mustRun(t, sh, `trap 'printf "%s" last' EXIT; exit 5`)
		if res.ExitCode != 5 || strings.TrimSpace(string(res.Stdout)) != "last" {
			t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
	})
}

// An EXIT trap that floods the shell's own stdout (the status pipe) must
// not make the server hold the flood: it is the command's output, capped
// and counted like any other. Before, the server kept all of it (919 MiB
// of heap after 3 s of `yes`).
func TestExitTrapFloodIsCappedOutput(t *testing.T) {
	sh, _ := newTestShell(t)
	res := mustRun(t, sh, `trap 'yes' EXIT; exit 0`, ExecOptions{Timeout: 2 * time.Second, MaxOutput: 1 << 10})
	if !res.TimedOut || !res.ShellRestarted || !res.Truncated ||
		!strings.HasPrefix(string(res.Stdout), "y\ny\ny\n") || len(res.Stdout) > 2<<10 {
		t.Fatalf("timed out %v restarted %v truncated %v stdout %d of %d bytes, starts %q",
			res.TimedOut, res.ShellRestarted, res.Truncated, len(res.Stdout), res.StdoutBytes, head(res.Stdout))
	}
	if res.StdoutBytes <= 2*statusCap {
		t.Fatalf("stdout counted %d bytes: the flood (over %d) was held, not passed on", res.StdoutBytes, 2*statusCap)
	}
	expectOut(t, sh, "echo ok", 0, "ok")
}

// A large environment still travels in the status record whole: bounding
// the status pipe does not cut the exports a shell can really have.
func TestLargeExportsStayState(t *testing.T) {
	sh, _ := newTestShell(t)
	res := mustRun(t, sh, `export BIG=$(head -c 3000000 /dev/zero | tr '\0' x); echo set`)
	if strings.TrimSpace(string(res.Stdout)) != "set" || res.ShellRestarted {
		t.Fatalf("stdout %q stderr %q restarted %v", head(res.Stdout), head(res.Stderr), res.ShellRestarted)
	}
	if got := sh.State().Env["BIG"]; len(got) != 3000000 {
		t.Fatalf("state holds BIG of %d bytes, want 3000000", len(got))
	}
	expectOut(t, sh, `echo ${#BIG}`, 0, "3000000")
}

func head(b []byte) string {
	if len(b) > 40 {
		b = b[:40]
	}
	return string(b)
}
