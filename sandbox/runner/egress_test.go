package runner_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox/runner"
	"github.com/warrenhq/warren/sandbox/runner/pki"
	"github.com/warrenhq/warren/sandbox/runner/runnertest"
)

// egressFiles writes a runner's certificate of ca and ca itself, as a
// pod's Secret holds them.
func egressFiles(t *testing.T, ca *pki.CA) runner.TLSFiles {
	t.Helper()
	dir := t.TempDir()
	pair, err := ca.Issue("warren-abc.ns.warren-runner", true, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := runner.TLSFiles{Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key"), ClientCA: filepath.Join(dir, "ca.crt")}
	for p, b := range map[string][]byte{f.Cert: pair.CertPEM, f.Key: pair.KeyPEM, f.ClientCA: ca.PEM} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// fakeProxy is a TLS server with a certificate of ca for name, that
// reports the client certificates it sees and answers "proxied" to each
// connection, or holds it open (hold).
func fakeProxy(t *testing.T, ca *pki.CA, name string, hold bool) (addr string, seen chan string) {
	t.Helper()
	pair, err := ca.Issue(name, true, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAnyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	seen = make(chan string, 1024)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				tc := c.(*tls.Conn)
				if tc.Handshake() != nil {
					c.Close()
					return
				}
				peer := tc.ConnectionState().PeerCertificates
				seen <- peer[0].DNSNames[0]
				if hold {
					t.Cleanup(func() { c.Close() })
					return
				}
				io.WriteString(c, "proxied")
				c.Close()
			}()
		}
	}()
	return ln.Addr().String(), seen
}

// startForwarder runs runner.ForwardTLS on a free loopback port and
// returns it.
func startForwarder(t *testing.T, files runner.TLSFiles, proxy string) string {
	t.Helper()
	cfg, err := files.EgressTLS()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ready := make(chan error, 1)
	go func() { ready <- runner.ForwardTLS(addr, proxy, cfg, func() { ready <- nil }) }()
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	return addr
}

func fetch(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

// The forwarder listens on loopback only: on any other address the pod's
// network (another pod, anything the NetworkPolicy lets in) could use the
// session's allowlist.
func TestEgressForwarderListensOnLoopbackOnly(t *testing.T) {
	cfg := &tls.Config{}
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "localhost:0", "10.1.2.3:3128"} {
		err := runner.ForwardTLS(addr, "127.0.0.1:1", cfg, func() { t.Errorf("%s: the forwarder listened", addr) })
		if err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("%s: %v", addr, err)
		}
	}
}

// The forwarder carries a connection to warren's proxy, presenting the
// runner's certificate; it sends nothing to a proxy whose certificate is
// not warren's authority's for the proxy's name (an impostor on the
// pod's network).
func TestEgressForwarderTrustsOnlyWarrensProxy(t *testing.T) {
	ca := mustCA(t, "warren runners")
	files := egressFiles(t, ca)

	good, seen := fakeProxy(t, ca, runner.EgressProxyName, false)
	if got := fetch(t, startForwarder(t, files, good)); got != "proxied" {
		t.Fatalf("through the forwarder: %q", got)
	}
	if name := <-seen; name != "warren-abc.ns.warren-runner" {
		t.Fatalf("the proxy saw the certificate of %q", name)
	}

	for what, proxy := range map[string]func() (string, chan string){
		"a proxy of another authority":        func() (string, chan string) { return fakeProxy(t, mustCA(t, "other"), runner.EgressProxyName, false) },
		"a runner's certificate as the proxy": func() (string, chan string) { return fakeProxy(t, ca, "warren-xyz.ns.warren-runner", false) },
	} {
		addr, seen := proxy()
		if got := fetch(t, startForwarder(t, files, addr)); got != "" {
			t.Errorf("%s: the forwarder passed on %q", what, got)
		}
		select {
		case name := <-seen:
			t.Errorf("%s got the runner's certificate (%s)", what, name)
		default:
		}
	}
}

// The forwarder holds at most EgressMaxConns connections at once: past
// it, a new connection is closed at once, while those it holds go on.
func TestEgressForwarderIsBounded(t *testing.T) {
	ca := mustCA(t, "warren runners")
	addr, seen := fakeProxy(t, ca, runner.EgressProxyName, true)
	fwd := startForwarder(t, egressFiles(t, ca), addr)
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for range runner.EgressMaxConns {
		c, err := net.Dial("tcp", fwd)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for range runner.EgressMaxConns {
		<-seen // each one reached the proxy: it holds a slot
	}
	if got := fetch(t, fwd); got != "" {
		t.Fatalf("one past the bound: %q", got)
	}
	select {
	case <-seen:
		t.Fatal("the connection past the bound reached the proxy")
	default:
	}
}

// The runner program takes the forwarder's flags only together and with
// --listen, and does not start on an address that is not loopback.
func TestRunnerEgressFlags(t *testing.T) {
	bin, err := runnertest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ca := mustCA(t, "warren runners")
	f := egressFiles(t, ca)
	tlsArgs := []string{"--listen", "127.0.0.1:0", "--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-client-ca", f.ClientCA}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--egress-listen", "127.0.0.1:0", "--egress-proxy", "127.0.0.1:1"}, 2, "with --listen"},
		{append(slices.Clone(tlsArgs), "--egress-listen", "127.0.0.1:0"), 2, "go together"},
		{append(slices.Clone(tlsArgs), "--egress-listen", "0.0.0.0:3128", "--egress-proxy", "127.0.0.1:1"), 1, "not a loopback address"},
	} {
		out, err := exec.Command(bin, tc.args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != tc.code || !strings.Contains(string(out), tc.want) {
			t.Errorf("warren-runner %q: %v\n%s", tc.args, err, out)
		}
	}
}
