package kuberunner_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warrenhq/warren/sandbox/kube"
	"github.com/warrenhq/warren/sandbox/kube/kubetest"
	"github.com/warrenhq/warren/sandbox/netproxy"
	"github.com/warrenhq/warren/sandbox/runner"
	"github.com/warrenhq/warren/sandbox/runner/pki"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/kuberunner"
	"github.com/warrenhq/warren/sessions/workspace/gittest"
)

// egressWorld is a server whose sessions' pods reach warren's egress
// proxy, and two hosts on the "internet": allowed.test, which sessions
// allow, and denied.test, which none does (both local HTTP servers the
// proxy is told where to find).
type egressWorld struct {
	cl            *kubetest.Cluster
	srv           *server
	px            *netproxy.Proxy
	proxyAddr     string
	port          string // both hosts' port
	allowedHits   atomic.Int64
	deniedHits    atomic.Int64
	allowedServer *httptest.Server
}

func newEgressWorld(t *testing.T) *egressWorld {
	t.Helper()
	w := &egressWorld{cl: kubetest.New(t, runnerBin)}
	mux := func(hits *atomic.Int64, body string) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			io.WriteString(rw, body)
		})
	}
	// One port for both: the names, not the ports, tell them apart.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.port = fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	hs := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Host, "denied.test") {
			mux(&w.deniedHits, "denied host answered\n").ServeHTTP(rw, r)
			return
		}
		mux(&w.allowedHits, "hello from the allowed host\n").ServeHTTP(rw, r)
	})}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	lo := netip.MustParseAddr("127.0.0.1")
	w.px = netproxy.New(netproxy.Options{Hosts: map[string]netip.Addr{"allowed.test": lo, "denied.test": lo}})
	t.Cleanup(w.px.Close)
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Close() })
	w.proxyAddr = pl.Addr().String()
	kcfg := kubeConfig(w.cl)
	kcfg.EgressProxy = w.proxyAddr
	w.srv = newServerCfg(t, w.cl, kcfg, sessions.Config{Network: sessions.NetworkConfig{Proxy: w.px}}, t.TempDir())
	go kuberunner.ServeEgress(context.Background(), w.srv.sbs, func(_ context.Context, id string) *netproxy.Session { return w.px.Lookup(id) }, pl)
	return w
}

// session makes a session in allowlist mode allowing allow, and runs a
// first command (which starts its shell, and so its proxy state).
func (w *egressWorld) session(t *testing.T, allow ...string) *sessions.Session {
	t.Helper()
	src, _, _ := gittest.Repo(t)
	n := sessions.Network{Mode: sessions.NetAllowlist, Allow: allow}
	s, err := w.srv.m.Create(ctxFor(t), "alice", sessions.CreateOptions{Source: src, Network: &n})
	if err != nil {
		t.Fatal(err)
	}
	w.srv.exec(t, s.ID, "true")
	return s
}

// curl fetches url in the session's pod through its runner's forwarder,
// and returns the HTTP status and body.
func (w *egressWorld) curl(t *testing.T, s *sessions.Session, url string) string {
	t.Helper()
	name, _ := kube.Name(s.ID)
	// The pods of the fake cluster share this host's network: a pod's
	// 127.0.0.1:3128 (what HTTP_PROXY says) is its own address here.
	proxy := "http://" + net.JoinHostPort(w.cl.PodIP(name), fmt.Sprint(w.cl.EgressPort()))
	res := w.srv.exec(t, s.ID, "curl -sS --max-time 20 -w ' %{http_code}' -x "+proxy+" "+url)
	return string(res.Stdout) + string(res.Stderr)
}

func (w *egressWorld) log(t *testing.T, s *sessions.Session) []netproxy.Decision {
	t.Helper()
	_, d, err := w.srv.m.NetworkLog(ctxFor(t), "alice", s.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A session in allowlist mode, in a pod: its shell's proxy variables name
// the pod's loopback, where its runner forwards to warren's proxy over
// mutual TLS; an allowed host answers, a denied one is refused without
// being reached, and the session's network log records both.
func TestKubernetesSessionAllowlistThroughWarrensProxy(t *testing.T) {
	w := newEgressWorld(t)
	s := w.session(t, "allowed.test:"+w.port)
	if res := w.srv.exec(t, s.ID, "echo $HTTP_PROXY $https_proxy"); string(res.Stdout) != "http://127.0.0.1:3128 http://127.0.0.1:3128\n" {
		t.Fatalf("the session's proxy variables: %q", res.Stdout)
	}
	if got := w.curl(t, s, "http://allowed.test:"+w.port+"/"); got != "hello from the allowed host\n 200" {
		t.Fatalf("the allowed host through the proxy: %q", got)
	}
	got := w.curl(t, s, "http://denied.test:"+w.port+"/")
	if !strings.HasSuffix(got, " 403") || !strings.Contains(got, "not in the session's allowlist") {
		t.Fatalf("the denied host through the proxy: %q", got)
	}
	// HTTPS: a CONNECT tunnel through the pod's forwarder and warren's
	// proxy, the TLS end to end between curl and the host.
	tlsHost := httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.WriteString(rw, "hello over tls\n")
	}))
	t.Cleanup(tlsHost.Close)
	_, tlsPort, _ := net.SplitHostPort(tlsHost.Listener.Addr().String())
	if _, err := w.srv.m.SetNetwork(ctxFor(t), "alice", s.ID, sessions.Network{Mode: sessions.NetAllowlist,
		Allow: []string{"allowed.test:" + w.port, "allowed.test:" + tlsPort}}); err != nil {
		t.Fatal(err)
	}
	if got := w.curl(t, s, "-k https://allowed.test:"+tlsPort+"/"); got != "hello over tls\n 200" {
		t.Fatalf("https through the proxy: %q", got)
	}
	if w.deniedHits.Load() != 0 || w.allowedHits.Load() != 1 {
		t.Fatalf("the hosts were reached %d (allowed) and %d (denied) times", w.allowedHits.Load(), w.deniedHits.Load())
	}
	// A session in mode none: no proxy variables, and its pod's forwarder
	// gets its connections closed by warren (no proxy state).
	src, _, _ := gittest.Repo(t)
	none, err := w.srv.m.Create(ctxFor(t), "alice", sessions.CreateOptions{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	if res := w.srv.exec(t, none.ID, `printf '%s' "$HTTP_PROXY"`); len(res.Stdout) != 0 {
		t.Fatalf("a session in mode none has HTTP_PROXY %q", res.Stdout)
	}
	if got := w.curl(t, none, "http://allowed.test:"+w.port+"/"); strings.Contains(got, "hello") || strings.HasSuffix(got, " 200") || strings.HasSuffix(got, " 403") {
		t.Fatalf("a session in mode none through warren's proxy: %q", got)
	}
	if w.allowedHits.Load() != 1 {
		t.Fatalf("the allowed host was reached %d times", w.allowedHits.Load())
	}
	var allowed, denied bool
	for _, d := range w.log(t, s) {
		allowed = allowed || d.Host == "allowed.test" && d.Allowed
		denied = denied || d.Host == "denied.test" && !d.Allowed
	}
	if !allowed || !denied {
		t.Fatalf("the network log: %+v", w.log(t, s))
	}
}

// secretTLS is the certificate and key in the cluster's Secret name.
func secretTLS(t *testing.T, cl *kubetest.Cluster, name, certKey, keyKey string) (cert, key []byte) {
	t.Helper()
	var sec corev1.Secret
	if err := cl.Client().Get(context.Background(), ctrl.ObjectKey{Namespace: kubetest.Namespace, Name: name}, &sec); err != nil {
		t.Fatal(err)
	}
	return sec.Data[certKey], sec.Data[keyKey]
}

// ask sends a proxy request for url to warren's egress proxy over TLS
// with the client certificate cert (none when nil), claiming in the clear
// to be session claim, and returns the status line, or the error.
func (w *egressWorld) ask(t *testing.T, cert *tls.Certificate, claim, url string) string {
	t.Helper()
	ca, _ := secretTLS(t, w.cl, "warren-runner-ca", "ca.crt", "ca.key")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: runner.EgressProxyName}
	if cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	d := &net.Dialer{Timeout: 10 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", w.proxyAddr, cfg)
	if err != nil {
		return "error: " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nX-Warren-Session: %s\r\nProxy-Authorization: Basic %s\r\nConnection: close\r\n\r\n",
		url, strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/"), claim, claim)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "error: " + err.Error()
	}
	return strings.TrimSpace(line)
}

func pair(t *testing.T, certPEM, keyPEM []byte) *tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// Attacks on the egress proxy for pods: a pod of session B (its runner's
// certificate) asking for a host only A allows, however it names A in the
// clear, gets B's policy (refused, in B's log); a certificate of another
// authority for A's runner, the server's own client certificate, a warm
// pool's runner certificate, or no certificate at all get no policy (the
// connection ends, nothing is fetched, nothing is logged for A).
func TestEgressProxyBelievesOnlyTheSessionsCertificate(t *testing.T) {
	w := newEgressWorld(t)
	a := w.session(t, "allowed.test:"+w.port)
	b := w.session(t, "denied.test:"+w.port)
	nameA, _ := kube.Name(a.ID)
	nameB, _ := kube.Name(b.ID)
	url := "http://allowed.test:" + w.port + "/"
	aLog := len(w.log(t, a))

	// B's pod, through its own runner's forwarder.
	if got := w.curl(t, b, url); !strings.HasSuffix(got, " 403") {
		t.Fatalf("session B's pod fetched a host only A allows: %q", got)
	}
	// B's runner's certificate, naming A everywhere it can in the clear.
	certB, keyB := secretTLS(t, w.cl, nameB+"-tls", "tls.crt", "tls.key")
	if got := w.ask(t, pair(t, certB, keyB), a.ID, url); !strings.Contains(got, " 403 ") {
		t.Fatalf("B's certificate claiming to be A: %q", got)
	}
	var bRefused bool
	for _, d := range w.log(t, b) {
		bRefused = bRefused || d.Host == "allowed.test" && !d.Allowed
	}
	if !bRefused {
		t.Fatalf("B's refusals are not in B's log: %+v", w.log(t, b))
	}

	// A foreign authority's certificate for A's runner's very name.
	foreign, err := pki.NewCA("warren runners", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certOfA, _ := secretTLS(t, w.cl, nameA+"-tls", "tls.crt", "tls.key")
	blk, _ := pem.Decode(certOfA)
	leafA, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := foreign.Issue(leafA.DNSNames[0], true, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// warren's own authority, for the server and for a warm pool.
	caCert, caKey := secretTLS(t, w.cl, "warren-runner-ca", "ca.crt", "ca.key")
	ours := authority(t, caCert, caKey)
	server, err := ours.Issue("warren-server", false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	poolName := strings.Replace(leafA.DNSNames[0], nameA, "warren-warm.pool", 1)
	pool, err := ours.Issue(poolName, true, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for what, cert := range map[string]*tls.Certificate{
		"another authority's certificate for A's runner": pair(t, forged.CertPEM, forged.KeyPEM),
		"the server's client certificate":                pair(t, server.CertPEM, server.KeyPEM),
		"a warm pool's runner certificate":               pair(t, pool.CertPEM, pool.KeyPEM),
		"no certificate":                                 nil,
	} {
		if got := w.ask(t, cert, a.ID, url); !strings.HasPrefix(got, "error: ") {
			t.Errorf("%s: the proxy answered %q", what, got)
		}
	}
	// A's own certificate, but over TLS 1.2: refused at the handshake.
	certA, keyA := secretTLS(t, w.cl, nameA+"-tls", "tls.crt", "tls.key")
	own := pair(t, certA, keyA)
	old := &tls.Config{MaxVersion: tls.VersionTLS12, InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return own, nil }}
	if c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", w.proxyAddr, old); err == nil {
		c.Close()
		t.Error("the proxy spoke TLS 1.2")
	}
	if w.allowedHits.Load() != 0 {
		t.Fatalf("the host only A allows was reached %d times", w.allowedHits.Load())
	}
	if n := len(w.log(t, a)); n != aLog {
		t.Fatalf("A's network log grew from %d to %d: %+v", aLog, n, w.log(t, a))
	}
}

// authority parses warren's certificate authority from its Secret.
func authority(t *testing.T, certPEM, keyPEM []byte) *pki.CA {
	t.Helper()
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return &pki.CA{Cert: cert, Key: key, PEM: certPEM}
}

// The runner and warren agree on the proxy's certificate name.
func TestEgressProxyNameAgrees(t *testing.T) {
	if runner.EgressProxyName != kube.EgressProxyName {
		t.Fatalf("the runner checks %q, warren's proxy is %q", runner.EgressProxyName, kube.EgressProxyName)
	}
}
