package sessions_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/pki"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/runnersuite"
)

// netRunner is a real `warren-runner --listen` on loopback with mutual
// TLS, standing in for the runner of a session's pod. Its commands run on
// this host, in a temporary directory, as the test's user: the suite's
// commands touch nothing but /tmp's listing and their own shell.
type netRunner struct {
	t                *testing.T
	bin, dir, cwd    string
	ca               *pki.CA
	runnerCert, mine pki.Pair

	mu   sync.Mutex
	addr string
	cmd  *exec.Cmd
}

func startNetRunner(t *testing.T) *netRunner {
	t.Helper()
	bin := os.Getenv(sandbox.RunnerEnv) // built by TestMain
	if bin == "" {
		t.Fatal("no runner binary: TestMain builds it (runnertest.Install)")
	}
	ca, err := pki.NewCA("warren", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	n := &netRunner{t: t, bin: bin, dir: t.TempDir(), cwd: t.TempDir(), ca: ca}
	if n.runnerCert, err = ca.Issue("127.0.0.1", true, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n.mine, err = ca.Issue("warren-server", false, time.Hour); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"cert.pem": n.runnerCert.CertPEM, "key.pem": n.runnerCert.KeyPEM, "ca.pem": ca.PEM} {
		if err := os.WriteFile(filepath.Join(n.dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n.start()
	t.Cleanup(n.kill)
	return n
}

// start starts the runner process (again, after kill) on a fresh port.
func (n *netRunner) start() {
	n.t.Helper()
	cmd := exec.Command(n.bin, "--listen", "127.0.0.1:0", "--tls-cert", filepath.Join(n.dir, "cert.pem"),
		"--tls-key", filepath.Join(n.dir, "key.pem"), "--tls-client-ca", filepath.Join(n.dir, "ca.pem"))
	cmd.Dir = n.cwd
	// A group of its own: killing the "pod" kills the runner, its shells
	// and whatever their commands started, as a container's end does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on ") {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		n.t.Fatalf("the runner did not say where it listens: %q %v", line, err)
	}
	n.mu.Lock()
	n.cmd, n.addr = cmd, strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	n.mu.Unlock()
}

// kill kills the runner and everything it started.
func (n *netRunner) kill() {
	n.mu.Lock()
	cmd := n.cmd
	n.cmd = nil
	n.mu.Unlock()
	if cmd != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}
}

// dial is the server's side: mutual TLS to wherever the runner listens now.
func (n *netRunner) dial(ctx context.Context) (*client.Conn, error) {
	cfg, err := pki.ClientTLS(n.ca.PEM, n.mine, "127.0.0.1")
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	addr := n.addr
	n.mu.Unlock()
	return client.DialTLS(ctx, addr, cfg)
}

func (n *netRunner) runner(t *testing.T, st sessions.ShellState) sessions.Runner {
	t.Helper()
	saved := sandbox.State(st)
	r, err := sessions.NetRunner(sandbox.DefaultProfile("/workspace"), n.dial, sandbox.Options{State: &saved})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The runner a pod would run, reached over TCP with mutual TLS: the same
// conformance suite as the local jail's and the fake's.
func TestNetRunnerConformance(t *testing.T) {
	n := startNetRunner(t)
	runnersuite.Run(t, n.runner)
}

// A runner that is killed (the pod restarted) costs the running command
// and the shell, not the session: the command ends reporting the restart,
// and the next one runs in a fresh shell, on the new runner, with the saved
// cwd and exports.
func TestNetRunnerKilledAndRestarted(t *testing.T) {
	n := startNetRunner(t)
	r := n.runner(t, sessions.ShellState{})
	defer r.Close()
	ctx := context.Background()
	if res, err := r.Exec(ctx, "cd /tmp && export K=kept", sessions.RunOptions{Timeout: time.Minute}); err != nil || res.ExitCode != 0 {
		t.Fatalf("cd and export: %+v %v", res, err)
	}

	// Killed while a command runs.
	printed := make(chan struct{})
	var once sync.Once
	done := make(chan sessions.CommandResult, 1)
	go func() {
		res, err := r.Exec(ctx, "echo go; sleep 30", sessions.RunOptions{Timeout: time.Minute,
			OnOutput: func(_ sessions.Stream, b []byte) {
				if strings.Contains(string(b), "go") {
					once.Do(func() { close(printed) })
				}
			}})
		if err != nil {
			t.Errorf("the command whose runner was killed: %v", err)
		}
		done <- res
	}()
	<-printed
	n.kill()
	if res := <-done; !res.ShellRestarted || res.ExitCode == 0 {
		t.Fatalf("a command whose runner was killed: %+v, want a failed status and ShellRestarted", res)
	}
	n.start()
	res, err := r.Exec(ctx, `echo "$K $PWD"`, sessions.RunOptions{Timeout: time.Minute})
	if err != nil || string(res.Stdout) != "kept /tmp\n" {
		t.Fatalf("on the restarted runner: %q %+v %v, want the saved cwd and exports", res.Stdout, res, err)
	}

	// Killed between commands.
	n.kill()
	n.start()
	res, err = r.Exec(ctx, `echo "$K $PWD"`, sessions.RunOptions{Timeout: time.Minute})
	if err != nil || string(res.Stdout) != "kept /tmp\n" || !res.ShellRestarted {
		t.Fatalf("after a restart between commands: %q %+v %v", res.Stdout, res, err)
	}
}
