package netproxy_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox/netproxy"
	"github.com/warrenhq/warren/sandbox/runner/runnertest"
)

// TestMain builds the jail's runner, which forwards the jail's connections.
func TestMain(m *testing.M) { os.Exit(runnertest.Main(m)) }

// world is the outside world simulated on loopback: an HTTP and an HTTPS
// server standing for remote hosts, a smart-HTTP git server, and a
// resolver the test controls.
type world struct {
	http, https, git *httptest.Server
	httpPort         string
	httpsPort        string
	gitPort          string
	caPEM            []byte
	resolver         fakeResolver
	// hosts pins the test's own names to loopback: the only relaxation of
	// the address checks, and only for these names.
	hosts map[string]netip.Addr
}

// fakeResolver answers from a map, like a DNS server an attacker controls.
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func newWorld(t testing.TB) *world {
	t.Helper()
	w := &world{}
	w.http = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(rw, "hello from %s over http", r.Host)
	}))
	t.Cleanup(w.http.Close)
	cert, ca := testCert(t, "allowed.test", "www.allowed.test")
	w.caPEM = ca
	w.https = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(rw, "hello from %s over https", r.Host)
	}))
	w.https.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	w.https.StartTLS()
	t.Cleanup(w.https.Close)
	w.git = httptest.NewServer(gitServer(t))
	t.Cleanup(w.git.Close)
	w.httpPort = port(w.http.URL)
	w.httpsPort = port(w.https.URL)
	w.gitPort = port(w.git.URL)
	loop := netip.MustParseAddr("127.0.0.1")
	w.hosts = map[string]netip.Addr{"allowed.test": loop, "www.allowed.test": loop, "git.test": loop}
	w.resolver = fakeResolver{
		"denied.test":   {loop},
		"loopback.test": {loop},
		"meta.test":     {netip.MustParseAddr("169.254.169.254")},
		"private.test":  {netip.MustParseAddr("10.0.0.1")},
		"v6loop.test":   {netip.MustParseAddr("::1")},
		"mixed.test":    {netip.MustParseAddr("93.184.216.34"), loop},
		"mapped.test":   {netip.MustParseAddr("::ffff:127.0.0.1")},
	}
	return w
}

func port(u string) string {
	_, p, _ := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://"))
	return p
}

// proxy returns a proxy of this world with the test names pinned.
func (w *world) proxy(opts netproxy.Options) *netproxy.Proxy {
	opts.Resolver = w.resolver
	opts.Hosts = w.hosts
	return netproxy.New(opts)
}

// testCert makes a self-signed certificate for names; caPEM is what a
// client must trust.
func testCert(t testing.TB, names ...string) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// gitServer serves a repository "repo.git" with one commit over git's
// smart HTTP protocol (git http-backend as a CGI).
func gitServer(t testing.TB) http.Handler {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join(root, "src")
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	run(src, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(src, "README"), []byte("fetched through the proxy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(src, "add", "README")
	run(src, "commit", "-q", "-m", "first")
	run(root, "clone", "-q", "--bare", src, "repo.git")
	return &cgi.Handler{Path: gitBackend(t), Root: "/",
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
}

func gitBackend(t testing.TB) string {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
}
