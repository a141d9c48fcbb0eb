package workspace

import (
	"context"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

func TestPublicAddr(t *testing.T) {
	for s, public := range map[string]bool{
		"8.8.8.8": true, "140.82.112.3": true, "2606:4700::1111": true,
		"127.0.0.1": false, "127.8.9.10": false, "::1": false, "0.0.0.0": false, "::": false,
		"10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false, "169.254.169.254": false,
		"100.64.0.1": false, "100.127.255.254": false, "224.0.0.1": false, "255.255.255.255": false,
		"fe80::1": false, "fc00::1": false, "fd12::1": false, "ff02::1": false,
		"::ffff:127.0.0.1": false, "::ffff:169.254.169.254": false, "::ffff:10.0.0.1": false,
		"::127.0.0.1": false, "64:ff9b::7f00:1": false, "2002:7f00:1::": false, "2001:0:4136::1": false,
		"198.18.0.1": false, "192.0.2.1": false, "240.0.0.1": false,
	} {
		if got := publicAddr(netip.MustParseAddr(s), false); got != public {
			t.Errorf("publicAddr(%s) = %v, want %v", s, got, public)
		}
	}
}

// countingServer is an HTTPS server on loopback that counts what reaches it.
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "not git", http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// TestRemoteClonesReachOnlyPublicAddresses: what a caller who is not the
// operator names is checked on the address dialed, in every notation, and
// the error is the same whether something listens there or not.
func TestRemoteClonesReachOnlyPublicAddresses(t *testing.T) {
	srv, hits := countingServer(t)
	trustTestServer(t, srv)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	closed := httptest.NewServer(http.NotFoundHandler())
	closedPort := closed.URL[strings.LastIndex(closed.URL, ":")+1:]
	closed.Close()
	messages := map[string]string{}
	for _, host := range []string{"127.0.0.1", "localhost", "[::1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]",
		"2130706433", "0x7f000001", "0177.0.0.1", "127.1", "169.254.169.254", "100.64.0.1", "10.0.0.1", "[fe80::1]",
		"0.0.0.0"} {
		for _, p := range []string{port, closedPort} {
			src := "https://" + host + ":" + p + "/repo.git"
			_, err := Prepare(context.Background(), Spec{Source: src, Dir: filepath.Join(t.TempDir(), "ws")})
			if err == nil {
				t.Fatalf("%s: cloned", src)
			}
			msg := strings.ReplaceAll(err.Error(), p, "PORT")
			if other, ok := messages[host]; ok && other != msg {
				t.Errorf("%s: the open and the closed port give different errors:\n%s\n%s", host, other, msg)
			}
			messages[host] = msg
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback server answered %d requests", n)
	}
	t.Log(messages["localhost"])
}

// trustTestServer makes the clone transport trust srv's certificate for
// the test.
func trustTestServer(t *testing.T, srv *httptest.Server) {
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	client.InstallProtocol("https", githttp.NewClient(guardedHTTPClient(roots)))
	t.Cleanup(installGuardedHTTP)
}

// gitServer serves src over smart HTTP(S) with git http-backend (the test's
// own git, not the server's).
func gitServer(t *testing.T, src string) *httptest.Server {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	h := &cgi.Handler{Path: gitBin, Args: []string{"http-backend"}, Stderr: io.Discard,
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(src), "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_CONFIG_PARAMETERS='safe.directory'='*'"}}
	mux := http.NewServeMux()
	mux.Handle("/", h)
	// /moved/ redirects to plain http: refused for remote callers.
	mux.HandleFunc("/moved/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+r.Host+strings.TrimPrefix(r.URL.RequestURI(), "/moved"), http.StatusFound)
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestHTTPSCloneForRemoteCallers clones over https as a caller who is not
// the operator, with only the loopback refusal relaxed for the test.
func TestHTTPSCloneForRemoteCallers(t *testing.T) {
	src, first, second := gitRepo(t)
	srv := gitServer(t, src)
	trustTestServer(t, srv)
	remote := Policy{allowLoopback: true}
	url := srv.URL + "/" + filepath.Base(src)
	for _, tc := range []struct{ ref, want string }{{"", second}, {"v1", first}, {"feature", ""}} {
		dir := filepath.Join(t.TempDir(), "ws")
		p, err := Prepare(context.Background(), Spec{Source: url, Ref: tc.ref, Dir: dir, Policy: remote})
		if err != nil {
			t.Fatalf("clone %s at %q: %v", url, tc.ref, err)
		}
		if tc.want != "" && p.Commit != tc.want || p.Source != url {
			t.Errorf("clone at %q: %+v", tc.ref, p)
		}
	}
	_, err := Prepare(context.Background(), Spec{Source: url, Ref: "nope", Dir: filepath.Join(t.TempDir(), "ws"), Policy: remote})
	if err == nil || !strings.Contains(err.Error(), `ref "nope" is not a branch, tag or commit`) {
		t.Errorf("missing ref: %v", err)
	}
	for _, bad := range []string{srv.URL + "/nothing-here.git", srv.URL + "/moved/" + filepath.Base(src)} {
		_, err = Prepare(context.Background(), Spec{Source: bad, Dir: filepath.Join(t.TempDir(), "ws"), Policy: remote})
		if err == nil || !strings.Contains(err.Error(), "did not answer as a git repository") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	// Without the relaxation, the same server is refused.
	_, err = Prepare(context.Background(), Spec{Source: url, Dir: filepath.Join(t.TempDir(), "ws")})
	if err == nil || !strings.Contains(err.Error(), "public internet address") {
		t.Errorf("loopback without the test relaxation: %v", err)
	}
}
