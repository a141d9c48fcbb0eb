package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/crypto/ssh"

	"github.com/warrenhq/warren/sessions/identity"
	"github.com/warrenhq/warren/sessions/workspace/gittest"
)

// bareRepo makes a bare repository (.../org/repo.git) with one commit on main (README.md,
// lib/util.go) and returns its path, a function running git in it, and the
// commit.
func bareRepo(t testing.TB) (string, func(...string) string, string) {
	t.Helper()
	root := t.TempDir()
	bare := filepath.Join(root, "org", "repo.git")
	gittest.Git(t, root)("init", "-q", "--bare", "-b", "main", bare)
	work := filepath.Join(root, "seed")
	os.Mkdir(work, 0o755)
	g := gittest.Git(t, work)
	g("init", "-q", "-b", "main")
	gittest.Write(t, work, "README.md", "hello from upstream\n")
	gittest.Write(t, work, "lib/util.go", "package lib\n")
	g("add", "-A")
	g("commit", "-qm", "upstream: first")
	g("push", "-q", bare, "main")
	return bare, gittest.Git(t, bare), g("rev-parse", "HEAD")
}

// sshServer is Debian's openssh-server run by the test as the current
// user on a loopback port, serving git through git-shell only.
type sshServer struct {
	port    int
	dir     string
	user    string
	hostPub ssh.PublicKey
	cmd     *exec.Cmd
}

// startSSHD starts sshd with a fresh host key; authorized is the
// authorized_keys line (a warren identity's public key).
func startSSHD(t testing.TB, authorized string) *sshServer {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	s := &sshServer{dir: t.TempDir(), user: u.Username}
	if err := os.WriteFile(filepath.Join(s.dir, "authorized_keys"), []byte(authorized+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// sshd's privilege separation directory; a Debian install makes it at
	// boot, a fresh container may not have it.
	if _, err := os.Stat("/run/sshd"); os.IsNotExist(err) && os.Geteuid() == 0 {
		os.MkdirAll("/run/sshd", 0o755)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s.restart(t)
	return s
}

// restart (re)starts sshd on the same port with a new host key.
func (s *sshServer) restart(t testing.TB) {
	t.Helper()
	s.stop()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "test host")
	if err != nil {
		t.Fatal(err)
	}
	hostKey := filepath.Join(s.dir, "host_key")
	os.Remove(hostKey)
	if err := os.WriteFile(hostKey, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	s.hostPub, _ = ssh.NewPublicKey(priv.Public())
	cfg := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
PidFile none
AuthorizedKeysFile %s
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowTcpForwarding no
X11Forwarding no
PermitTTY no
ForceCommand git-shell -c "$SSH_ORIGINAL_COMMAND"
`, s.port, hostKey, filepath.Join(s.dir, "authorized_keys"))
	cfgPath := filepath.Join(s.dir, "sshd_config")
	os.WriteFile(cfgPath, []byte(cfg), 0o600)
	cmd := exec.Command("/usr/sbin/sshd", "-f", cfgPath, "-D", "-e")
	cmd.Stderr = newTestLog(t, "sshd: ")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sshd (openssh-server, installed by .ci/run): %v", err)
	}
	s.cmd = cmd
	t.Cleanup(s.stop)
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.port)); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("sshd did not listen")
}

func (s *sshServer) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

// url is the ssh URL of a repository path on this server.
func (s *sshServer) url(path string) string {
	return fmt.Sprintf("ssh://%s@127.0.0.1:%d%s", s.user, s.port, path)
}

// lines splits git's output into lines, none for empty output.
func lines(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return strings.Split(strings.TrimSpace(s), "\n")
}

// gitHTTPS serves the repositories under root with git http-backend (CGI)
// behind a TLS server of this test, accepting only Basic auth with the
// given token as password. It returns the server's URL and the path of
// its certificate, for SSL_CERT_FILE.
func gitHTTPS(t testing.TB, root, token string) (string, string) {
	t.Helper()
	backend := &cgi.Handler{Path: "/usr/lib/git-core/git-http-backend",
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_GLOBAL=/dev/null"}}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pw, ok := r.BasicAuth(); !ok || pw != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cert := filepath.Join(t.TempDir(), "cert.pem")
	der := srv.Certificate().Raw
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv.URL, cert
}

// serveStdioLogged is serveStdio with the server's stderr also kept in log.
func serveStdioLogged(t testing.TB, log *syncBuffer, args ...string) *client {
	t.Helper()
	cmd := exec.Command(warrenBin, append([]string{"serve", "stdio"}, args...)...)
	cmd.Stderr = io.MultiWriter(newTestLog(t, "server: "), log)
	return connect(t, &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second})
}

// identitySeed opens owner's identity name the way the server does (the
// server key from the data directory) and returns its Ed25519 seed: what
// must appear nowhere else in the clear.
func identitySeed(t testing.TB, data, owner, name string) []byte {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(data, "warren.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var id, sealed string
	if err := db.QueryRow(`SELECT id, sealed_key FROM git_identities WHERE owner = ? AND name = ?`, owner, name).
		Scan(&id, &sealed); err != nil {
		t.Fatal(err)
	}
	seal, err := identity.LoadKey(data, "")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := seal.Open(sealed, id+"/key")
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.ParseRawPrivateKey(plain)
	if err != nil {
		t.Fatal(err)
	}
	return (*key.(*ed25519.PrivateKey)).Seed()
}

// leaksOf lists where the secret appears, raw, hex or base64, or where any
// private key block does: the server's log, results, the database and its
// WAL, and every file of the data directory's workspaces, homes and audits.
func leaksOf(t testing.TB, data, log string, results []byte, secret []byte) []string {
	t.Helper()
	needles := [][]byte{secret, []byte(hex.EncodeToString(secret)), []byte(base64.StdEncoding.EncodeToString(secret)),
		[]byte("PRIVATE KEY")}
	var out []string
	check := func(where string, b []byte) {
		for _, n := range needles {
			if bytes.Contains(b, n) {
				out = append(out, where)
				return
			}
		}
	}
	check("the server's log", []byte(log))
	check("a tool result", results)
	for _, f := range []string{"warren.db", "warren.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(data, f))
		check(f, b)
	}
	for _, dir := range []string{"audit", "workspaces", "homes"} {
		filepath.WalkDir(filepath.Join(data, dir), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				b, _ := os.ReadFile(p)
				check(p, b)
			}
			return nil
		})
	}
	return out
}

// newTestHostKey is a fresh Ed25519 public key.
func newTestHostKey(t testing.TB) ssh.PublicKey {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
