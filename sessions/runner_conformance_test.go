package sessions_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/fakerunner"
	"github.com/warrenhq/warren/sessions/runnersuite"
)

// workspaceDir returns a workspace a jail running as another uid (tests
// run as root in CI) can reach: t.TempDir's parent is 0700.
func workspaceDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap is not installed: run 'just deps' (CI installs it; these tests need real jails)")
	}
	d := t.TempDir()
	if err := os.Chmod(filepath.Dir(d), 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// The local runner: a bwrap jail on this host.
func TestLocalRunnerConformance(t *testing.T) {
	runnersuite.Run(t, func(t *testing.T, st sessions.ShellState) sessions.Runner {
		saved := sandbox.State(st)
		r, err := sessions.LocalRunner(sandbox.DefaultProfile(workspaceDir(t)), sandbox.Options{State: &saved})
		if err != nil {
			t.Fatal(err)
		}
		return r
	})
}

// The fake runner of the tests answers as the real one does.
func TestFakeRunnerConformance(t *testing.T) {
	runnersuite.Run(t, func(t *testing.T, st sessions.ShellState) sessions.Runner {
		return fakerunner.NewWithState(st, nil)
	})
}
