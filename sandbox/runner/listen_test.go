package runner_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/pki"
	"github.com/warrenhq/warren/sandbox/runner/proto"
	"github.com/warrenhq/warren/sandbox/runner/runnertest"
)

type netRunner struct {
	addr string
	ca   *pki.CA
}

// startNetRunner starts warren-runner --listen on loopback with a
// certificate of ca, accepting servers whose certificates clientCA issued.
func startNetRunner(t *testing.T, bin string, ca, clientCA *pki.CA) string {
	t.Helper()
	dir := t.TempDir()
	pair, err := ca.Issue("127.0.0.1", true, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--tls-cert", write("cert.pem", pair.CertPEM),
		"--tls-key", write("key.pem", pair.KeyPEM), "--tls-client-ca", write("ca.pem", clientCA.PEM))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on ") {
		t.Fatalf("the runner did not say where it listens: %q %v", line, err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
}

func mustCA(t *testing.T, name string) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA(name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func clientConfig(t *testing.T, runnersCA, clientCA *pki.CA) *tls.Config {
	t.Helper()
	own, err := clientCA.Issue("warren-server", false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.ClientTLS(runnersCA.PEM, own, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func ping(ctx context.Context, c *client.Conn) error {
	var res proto.PingResult
	return c.Call(ctx, proto.OpPing, proto.PingArgs{}, nil, &res)
}

// The runner a pod would run, reached over TCP: it serves a server with a
// certificate of the authority it was given, and nobody else; the server
// talks only to a runner with a certificate of its own authority.
func TestRunnerOverTCPWithMutualTLS(t *testing.T) {
	bin, err := runnertest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ca := mustCA(t, "warren")
	addr := startNetRunner(t, bin, ca, ca)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	good, err := client.DialTLS(ctx, addr, clientConfig(t, ca, ca))
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if err := ping(ctx, good); err != nil {
		t.Fatalf("a server with the right certificate: %v", err)
	}

	// No client certificate, or one of another authority: refused, and
	// the runner goes on serving the good connection.
	noCert := clientConfig(t, ca, ca)
	noCert.Certificates = nil
	other := mustCA(t, "someone else")
	for name, cfg := range map[string]*tls.Config{"no certificate": noCert, "another authority": clientConfig(t, ca, other)} {
		c, err := client.DialTLS(ctx, addr, cfg)
		if err == nil {
			err = ping(ctx, c)
			c.Close()
		}
		if err == nil {
			t.Errorf("a server with %s was served", name)
		}
	}
	if err := ping(ctx, good); err != nil {
		t.Fatalf("the good connection after refused ones: %v", err)
	}

	// A runner whose certificate another authority issued is not
	// believed, whatever it says.
	impostor := startNetRunner(t, bin, other, ca)
	if c, err := client.DialTLS(ctx, impostor, clientConfig(t, ca, ca)); err == nil {
		if err := ping(ctx, c); err == nil {
			t.Error("the server talked to a runner its authority did not certify")
		}
		c.Close()
	}
}

// --listen without the certificates refuses to start, saying why.
func TestRunnerRefusesANetworkWithoutTLS(t *testing.T) {
	bin, err := runnertest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--listen", "127.0.0.1:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--tls-client-ca") {
		t.Fatalf("--listen without TLS: %v %s", err, out)
	}
}

// A server that connects ends the connection before it, and its shell
// with what runs there, before it is served: one shell drives a pod's
// workspace at a time, even when the server that held the older
// connection cannot close it (a replica frozen, or cut off, past its
// lease, while another replica takes the session over).
func TestNewConnectionEndsThePreviousShell(t *testing.T) {
	bin, err := runnertest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ca := mustCA(t, "warren")
	addr := startNetRunner(t, bin, ca, ca)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()

	old, err := client.DialTLS(ctx, addr, clientConfig(t, ca, ca))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	cmd := "echo $$ > " + dir + "/pid; echo started; sleep 100; echo late > " + dir + "/late"
	st, err := old.Open(ctx, proto.OpShellExec, proto.ShellExecArgs{TimeoutMS: 120000, Init: ":\n", Length: len(cmd)}, []byte(cmd))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if first, err := st.Next(); err != nil || !strings.Contains(string(first), "started") {
		t.Fatalf("first output %q %v", first, err)
	}
	b, err := os.ReadFile(dir + "/pid")
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil || pid <= 1 {
		t.Fatalf("the shell's pid: %q", b)
	}

	next, err := client.DialTLS(ctx, addr, clientConfig(t, ca, ca))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if err := ping(ctx, next); err != nil {
		t.Fatalf("the new connection: %v", err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("the older connection's shell (pid %d) still runs while the new connection is served", pid)
	}
	if err := ping(ctx, old); err == nil {
		t.Fatal("the older connection is still served")
	}
	// The new connection's shell works as any.
	cmd = "test -e " + dir + "/pid"
	var res proto.ShellExecResult
	if err := next.Call(ctx, proto.OpShellExec, proto.ShellExecArgs{TimeoutMS: 10000, Init: ":\n", Length: len(cmd)}, []byte(cmd), &res); err != nil || res.ExitCode != 0 {
		t.Fatalf("a command on the new connection: %+v %v", res, err)
	}
}
