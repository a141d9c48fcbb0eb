package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// RunnerName is the runner's binary: the small program every jail runs
// beside its shell (cmd/warren-runner), shipped with warren.
const RunnerName = "warren-runner"

// RunnerEnv names a runner binary to use instead of the one beside warren.
const RunnerEnv = "WARREN_RUNNER"

// FindRunner returns the path of the runner binary: name when given, else
// $WARREN_RUNNER, else warren-runner beside the running binary, else on
// PATH. The error says where it looked and how to install it.
func FindRunner(name string) (string, error) {
	if name == "" {
		name = os.Getenv(RunnerEnv)
	}
	if name != "" {
		if err := runnable(name); err != nil {
			return "", fmt.Errorf("the runner %s: %w (it is warren's %s, built with warren: 'just build', or "+
				"'go install github.com/warrenhq/warren/cmd/...')", name, err, RunnerName)
		}
		return name, nil
	}
	var tried []string
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), RunnerName)
		if runnable(p) == nil {
			return p, nil
		}
		tried = append(tried, filepath.Dir(exe))
	}
	if p, err := exec.LookPath(RunnerName); err == nil {
		return p, nil
	}
	tried = append(tried, "PATH")
	return "", fmt.Errorf("%s (the program warren runs inside each jail) was not found beside warren nor on PATH "+
		"(looked in %v): install both with 'go install github.com/warrenhq/warren/cmd/...' or 'just build', "+
		"or name it in $%s", RunnerName, tried, RunnerEnv)
}

func runnable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("not an executable file")
	}
	return nil
}
