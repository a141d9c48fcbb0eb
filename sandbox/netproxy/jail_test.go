package netproxy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sandbox/netproxy"
)

// jailWorkspace makes a workspace the jail's uid can reach (t.TempDir's
// parent is 0700, which a jail running as nobody cannot search).
func jailWorkspace(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "warren-net-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// allowlistShell starts a jail in allowlist mode served by sess.
func allowlistShell(t testing.TB, sess *netproxy.Session) (*sandbox.Shell, string) {
	t.Helper()
	dir := jailWorkspace(t)
	p := sandbox.DefaultProfile(dir)
	p.Egress = &sandbox.Egress{Attach: sess.Attach}
	sh, err := sandbox.NewShell(p, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	return sh, dir
}

func run(t testing.TB, sh *sandbox.Shell, command string) sandbox.Result {
	t.Helper()
	res, err := sh.Exec(context.Background(), command, sandbox.ExecOptions{Timeout: 60 * time.Second})
	if err != nil {
		t.Fatalf("Exec(%q): %v", command, err)
	}
	return res
}

func rules(t testing.TB, items ...string) []netproxy.Rule {
	t.Helper()
	r, err := netproxy.Expand(items, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAllowlistJailReachesAllowedNamesOnly(t *testing.T) {
	w := newWorld(t)
	p := w.proxy(netproxy.Options{})
	defer p.Close()
	sess := p.Session("s-jail")
	sess.SetAllow(rules(t, "allowed.test:"+w.httpPort, "allowed.test:"+w.httpsPort, "git.test:"+w.gitPort,
		"loopback.test:"+w.httpPort, "meta.test:"+w.httpPort, "private.test:"+w.httpPort,
		"v6loop.test:"+w.httpPort, "mixed.test:"+w.httpPort, "mapped.test:"+w.httpPort))
	sh, dir := allowlistShell(t, sess)
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), w.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("http", func(t *testing.T) {
		res := run(t, sh, "curl -sS http://allowed.test:"+w.httpPort+"/")
		if res.ExitCode != 0 || string(res.Stdout) != "hello from allowed.test:"+w.httpPort+" over http" {
			t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
	})
	t.Run("https through CONNECT", func(t *testing.T) {
		res := run(t, sh, "curl -sS --cacert ca.pem https://allowed.test:"+w.httpsPort+"/")
		if res.ExitCode != 0 || string(res.Stdout) != "hello from allowed.test:"+w.httpsPort+" over https" {
			t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
	})
	t.Run("denied name gets 403 with its explanation", func(t *testing.T) {
		res := run(t, sh, "curl -sS -w '\\n%{http_code}' http://denied.test:"+w.httpPort+"/")
		out := string(res.Stdout)
		for _, want := range []string{"403", "denied.test:" + w.httpPort + " is not in the session's allowlist",
			"To allow it, add \"denied.test\""} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		res = run(t, sh, "curl -sS --cacert ca.pem https://denied.test:"+w.httpsPort+"/")
		if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "403") {
			t.Errorf("CONNECT to a denied name: exit %d stderr %q", res.ExitCode, res.Stderr)
		}
	})
	t.Run("allowed names resolving to local addresses are refused", func(t *testing.T) {
		for _, name := range []string{"loopback.test", "meta.test", "private.test", "v6loop.test", "mixed.test", "mapped.test"} {
			res := run(t, sh, "curl -sS -w '\\n%{http_code}' http://"+name+":"+w.httpPort+"/")
			out := string(res.Stdout)
			if !strings.HasSuffix(out, "403") || !strings.Contains(out, "never connects to") || strings.Contains(out, "hello") {
				t.Errorf("%s: %q", name, out)
			}
		}
	})
	t.Run("literal local addresses in any notation are refused", func(t *testing.T) {
		for _, host := range []string{"127.0.0.1", "2130706433", "0x7f.1", "0177.0.0.1", "127.1", "[::1]", "[::ffff:127.0.0.1]", "169.254.169.254"} {
			res := run(t, sh, "curl -sS -w '\\n%{http_code}' --noproxy '' --globoff http://"+host+":"+w.httpPort+"/")
			out := string(res.Stdout)
			if strings.Contains(out, "hello") || !strings.HasSuffix(out, "403") && !strings.HasSuffix(out, "400") {
				t.Errorf("%s: %q %q", host, out, res.Stderr)
			}
		}
	})
	t.Run("direct connections fail", func(t *testing.T) {
		for _, u := range []string{"http://127.0.0.1:" + w.httpPort + "/", "http://93.184.216.34/", "http://[::1]:" + w.httpPort + "/"} {
			res := run(t, sh, "curl -sS --globoff --noproxy '*' --max-time 5 "+u)
			if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "hello") {
				t.Errorf("direct %s: exit %d stdout %q", u, res.ExitCode, res.Stdout)
			}
		}
	})
	t.Run("git clone over smart HTTP", func(t *testing.T) {
		res := run(t, sh, "git clone -q http://git.test:"+w.gitPort+"/repo.git r && cat r/README")
		if res.ExitCode != 0 || string(res.Stdout) != "fetched through the proxy\n" {
			t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
	})
	t.Run("a changed allowlist applies to the next connection", func(t *testing.T) {
		sess.SetAllow(rules(t, "git.test:"+w.gitPort))
		res := run(t, sh, "curl -sS -w '\\n%{http_code}' http://allowed.test:"+w.httpPort+"/")
		if !strings.HasSuffix(string(res.Stdout), "403") {
			t.Fatalf("after removal: %q", res.Stdout)
		}
		sess.SetAllow(rules(t, "allowed.test:"+w.httpPort))
		res = run(t, sh, "curl -sS http://allowed.test:"+w.httpPort+"/")
		if !strings.HasPrefix(string(res.Stdout), "hello") {
			t.Fatalf("after adding back: %q %q", res.Stdout, res.Stderr)
		}
	})
	t.Run("the forwarder survives timeouts and shell restarts", func(t *testing.T) {
		res, err := sh.Exec(context.Background(), "sleep 30", sandbox.ExecOptions{Timeout: 500 * time.Millisecond})
		if err != nil || !res.TimedOut {
			t.Fatalf("sleep: %v %+v", err, res)
		}
		if res := run(t, sh, "curl -sS http://allowed.test:"+w.httpPort+"/"); !strings.HasPrefix(string(res.Stdout), "hello") {
			t.Fatalf("after a timeout: %q %q", res.Stdout, res.Stderr)
		}
		if res := run(t, sh, "kill -9 $$"); !res.ShellRestarted {
			t.Fatalf("kill -9 $$ did not restart the shell: %+v", res)
		}
		if res := run(t, sh, "curl -sS http://allowed.test:"+w.httpPort+"/"); !strings.HasPrefix(string(res.Stdout), "hello") {
			t.Fatalf("after a restart: %q %q", res.Stdout, res.Stderr)
		}
	})
	t.Run("the decisions are logged with their bytes", func(t *testing.T) {
		var allowed, refused int
		for _, d := range sess.Log() {
			if d.Allowed {
				allowed++
				if d.BytesDown == 0 {
					t.Errorf("allowed decision without bytes: %+v", d)
				}
			} else {
				refused++
				if d.Reason == "" {
					t.Errorf("refusal without a reason: %+v", d)
				}
			}
		}
		if allowed == 0 || refused == 0 || sess.Bytes() == 0 {
			t.Fatalf("allowed %d refused %d bytes %d", allowed, refused, sess.Bytes())
		}
	})
}

func TestNoneModeLetsNothingOut(t *testing.T) {
	w := newWorld(t)
	dir := jailWorkspace(t)
	sh, err := sandbox.NewShell(sandbox.DefaultProfile(dir), sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	for _, c := range []string{
		"curl -sS --max-time 5 http://127.0.0.1:" + w.httpPort + "/",
		"curl -sS --max-time 5 -x http://127.0.0.1:3128 http://allowed.test:" + w.httpPort + "/",
		"curl -sS --max-time 5 http://93.184.216.34/",
		"printf '%s' \"$HTTP_PROXY$https_proxy\"",
	} {
		res := run(t, sh, c)
		if strings.Contains(string(res.Stdout), "hello") || strings.HasPrefix(c, "curl") && res.ExitCode == 0 ||
			strings.HasPrefix(c, "printf") && len(res.Stdout) > 0 {
			t.Errorf("%s: exit %d stdout %q", c, res.ExitCode, res.Stdout)
		}
	}
}
