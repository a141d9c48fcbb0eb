// Package runnertest builds the jail's runner (cmd/warren-runner) for the
// tests of packages that start jails: warren finds the runner beside its
// own binary, and a test binary has none beside it.
package runnertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The runner's file name and the variable that names it: name
// and sandbox.RunnerEnv (this package may not import sandbox, whose own
// tests use it).
const (
	name = "warren-runner"
	env  = "WARREN_RUNNER"
)

// Build builds the runner into dir as 'just build' does (static,
// stripped) and returns its path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "github.com/warrenhq/warren/cmd/warren-runner")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the runner: %v\n%s", err, out)
	}
	return bin, nil
}

// Main builds the runner into a temporary directory readable by a jail of
// another uid, names it in $WARREN_RUNNER, runs the tests and removes it:
// call it from TestMain as os.Exit(runnertest.Main(m)). bin, when given,
// is set to the runner's path (for tests that start it themselves).
func Main(m *testing.M, bin ...*string) int {
	cleanup, err := Install()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	for _, b := range bin {
		*b = os.Getenv(env)
	}
	return m.Run()
}

// Install builds the runner into a temporary directory readable by a jail
// of another uid and names it in $WARREN_RUNNER; cleanup removes it.
func Install() (cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "warren-runner-")
	if err != nil {
		return nil, err
	}
	_ = os.Chmod(dir, 0o755)
	bin, err := Build(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	os.Setenv(env, bin)
	return func() { os.RemoveAll(dir) }, nil
}
