package sandbox

import (
	"strconv"
	"strings"
	"testing"
)

// TestShellHasTheProcessLimit: the jail's shell, and so every process it
// starts, carries RLIMIT_NPROC from its first command on (dash's ulimit has
// no -u; the runner sets it on the shell before the shell reads a line).
// Before the runner owned the shell, the server set it from outside, which
// a root server without CAP_SYS_RESOURCE could not; the runner lowers a
// limit of its own child, which needs no privilege.
func TestShellHasTheProcessLimit(t *testing.T) {
	sh, _ := newTestShell(t, func(p *Profile) { p.Limits.Processes = 300 })
	res := mustRun(t, sh, "grep 'Max processes' /proc/$$/limits")
	f := strings.Fields(string(res.Stdout))
	if len(f) < 4 {
		t.Fatalf("the shell's limits: %q %q", res.Stdout, res.Stderr)
	}
	soft, err1 := strconv.Atoi(f[2])
	hard, err2 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || soft <= 0 || soft > 300 || hard > 300 {
		t.Fatalf("the jail's shell may start %q processes (soft) and %q (hard), want at most 300", f[2], f[3])
	}
	if res := mustRun(t, sh, "sh -c 'grep \"Max processes\" /proc/self/limits'"); !strings.Contains(string(res.Stdout), f[2]) {
		t.Fatalf("a command's process does not inherit the limit: %q", res.Stdout)
	}
}
