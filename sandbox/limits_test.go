package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// refusePrlimit makes every attempt to change a limit fail with EPERM, as
// for a root server without CAP_SYS_RESOURCE, until the test ends.
func refusePrlimit(t *testing.T) {
	prlimit = func(pid, resource int, newLimit, old *unix.Rlimit) error {
		if newLimit != nil {
			return unix.EPERM
		}
		return unix.Prlimit(pid, resource, newLimit, old)
	}
	t.Cleanup(func() { prlimit = unix.Prlimit })
}

// TestProcessLimitFailureFailsTheStart is issue 9 item 12: when the
// process limit cannot be set on the shell and no cgroup bounds the
// jail's processes either, the jail does not run; the error says which
// limit and what to do.
func TestProcessLimitFailureFailsTheStart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("RLIMIT_NPROC is set from outside only when the jail runs as another uid")
	}
	dir := testWorkspace(t)
	sh, err := NewShell(DefaultProfile(dir), Options{NoCgroup: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	refusePrlimit(t)
	_, err = sh.Exec(context.Background(), "echo ran", ExecOptions{})
	if err == nil || !strings.Contains(err.Error(), "RLIMIT_NPROC") || !strings.Contains(err.Error(), "CAP_SYS_RESOURCE") {
		t.Fatalf("Exec without any process limit: err %v, want a start error naming RLIMIT_NPROC and the fix", err)
	}
	if sh.Running() {
		t.Error("a jail runs without a process limit")
	}
}

// TestProcessLimitFallsBackToTheCgroup: in a container that denies the
// server CAP_SYS_RESOURCE, the jail's cgroup (pids.max) bounds it instead.
func TestProcessLimitFallsBackToTheCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("RLIMIT_NPROC is set from outside only when the jail runs as another uid")
	}
	sh, _ := newTestShell(t)
	refusePrlimit(t)
	expectOut(t, sh, "echo ran", 0, "ran")
	requireCgroups(t, sh)
	max, err := os.ReadFile(filepath.Join(sh.cg.dirs[0], "pids.max"))
	if err != nil || strings.TrimSpace(string(max)) != "256" {
		t.Errorf("the jail's pids.max: %q, %v; want 256", max, err)
	}
}
