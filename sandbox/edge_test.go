package sandbox

import (
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
		"exec 0<&-", "exec 1>&- 2>&-", "exec >/dev/null 2>&1", "exec 4>&- 5>&- 3>&-"} {
		res := mustRun(t, sh, cmd, ExecOptions{Timeout: time.Minute})
		if res.TimedOut || res.Duration > 10*time.Second {
			t.Errorf("%q: hung until %v (timed out %v)", cmd, res.Duration, res.TimedOut)
		}
		assertState(t, sh, "/workspace/p", "P", "1")
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
