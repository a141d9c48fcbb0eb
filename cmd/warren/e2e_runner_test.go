package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/sandbox"
)

// envWithout returns the environment without the variable name.
func envWithout(name string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// warren finds the runner beside its own binary, as 'just build' and 'go
// install' put it: no variable, no PATH entry needed.
func TestRunnerIsFoundBesideWarren(t *testing.T) {
	needJail(t)
	ws := jailDir(t)
	cmd := exec.Command(warrenBin, "serve", "stdio", "--workspace", ws, "--data-dir", t.TempDir())
	cmd.Env = append(envWithout(sandbox.RunnerEnv), "PATH=/usr/bin:/bin")
	cmd.Stderr = newTestLog(t, "server: ")
	c := connect(t, &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second})
	out := c.exec("echo hi from the jail")
	if !strings.Contains(out["stdout"].(string), "hi from the jail") {
		t.Fatalf("shell_exec: %v", out)
	}
}

// A warren copied without its runner says what is missing and how to get
// it, instead of failing on the first command with a bare error.
func TestMissingRunnerSaysHowToInstall(t *testing.T) {
	needJail(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "warren")
	data, err := os.ReadFile(warrenBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	ws := jailDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "shell", "--workspace", ws)
	cmd.Env = append(envWithout(sandbox.RunnerEnv), "PATH=/usr/bin:/bin")
	cmd.Stdin = strings.NewReader("echo hi\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	msg := stderr.String()
	if err == nil || !strings.Contains(msg, "warren-runner") || !strings.Contains(msg, "go install github.com/warrenhq/warren/cmd/...") {
		t.Fatalf("warren shell without its runner: %v, stderr %q", err, msg)
	}
}
