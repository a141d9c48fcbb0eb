package main

import (
	"bufio"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/warrenhq/warren/mcp/oauth/oauthtest"
)

// sdkVersion pins the TypeScript SDK whose own OAuth client connects in
// TestRemoteClientSignsInWithOAuth.
const sdkVersion = "1.32.2"

// installSDK installs the pinned @modelcontextprotocol/sdk under bin/
// (once) with the test's client script beside it, and returns the
// script's path.
func installSDK(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(root, "bin", "oauth-sdk-"+sdkVersion)
	if _, err := os.Stat(filepath.Join(prefix, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		out, err := exec.Command("npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", prefix,
			"@modelcontextprotocol/sdk@"+sdkVersion).CombinedOutput()
		if err != nil {
			t.Fatalf("npm install @modelcontextprotocol/sdk (the tests need npm and the npm registry): %v\n%s", err, out)
		}
	}
	script, err := os.ReadFile(filepath.Join("testdata", "oauth-client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// ES modules find packages from their own directory: the script runs
	// from the prefix.
	path := filepath.Join(prefix, "oauth-client.mjs")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// sdkClient is one run of the client script.
type sdkClient struct {
	t      *testing.T
	events chan map[string]any
}

func runSDKClient(t *testing.T, script string, args ...string) *sdkClient {
	t.Helper()
	cmd := exec.Command("node", append([]string{script}, args...)...)
	cmd.Stderr = newTestLog(t, "sdk client: ")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := &sdkClient{t: t, events: make(chan map[string]any, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				c.events <- ev
			}
		}
		close(c.events)
	}()
	return c
}

// next returns the client's next event, which must be want.
func (c *sdkClient) next(want string) map[string]any {
	c.t.Helper()
	select {
	case ev, ok := <-c.events:
		if !ok {
			c.t.Fatalf("the SDK client ended before %q", want)
		}
		if ev["event"] != want {
			c.t.Fatalf("the SDK client reported %v, want %q", ev, want)
		}
		return ev
	case <-time.After(90 * time.Second):
		c.t.Fatalf("the SDK client did not report %q", want)
	}
	return nil
}

// signInAndApprove is the person: in a fresh Chromium, open the
// authorization URL, sign in at the provider, read the consent page and
// allow; the browser lands on the client's loopback redirect.
func signInAndApprove(t *testing.T, authURL, wantOnPage string) {
	t.Helper()
	b := newBrowser(t)
	b.run("open the authorization URL", chromedp.Navigate(authURL))
	b.run("sign in at the provider",
		chromedp.WaitVisible("#email", chromedp.ByID),
		chromedp.SendKeys("#email", "alice@example.com", chromedp.ByID),
		chromedp.Click("#sign-in", chromedp.ByID),
		chromedp.WaitVisible(`button[value="approve"]`, chromedp.ByQuery))
	page := b.text("main")
	for _, want := range []string{wantOnPage, "alice@example.com", "127.0.0.1"} {
		if !strings.Contains(page, want) {
			t.Errorf("the consent page does not show %q:\n%s", want, page)
		}
	}
	b.run("allow", chromedp.Click(`button[value="approve"]`, chromedp.ByQuery))
	// The click navigates twice (warren, then the client's redirect):
	// evaluating while a navigation runs fails, so ask again until the
	// client's page is there.
	for range 400 {
		var text string
		if chromedp.Run(b.ctx, chromedp.Evaluate(`location.search.includes("code=") && document.readyState === "complete" ? "landed" : ""`, &text)) == nil && text == "landed" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	var text, where string
	_ = chromedp.Run(b.ctx, chromedp.Evaluate(`location.href + "\n" + (document.body ? document.body.innerText : "")`, &text))
	t.Fatalf("the browser did not reach the client's redirect page; it shows %s%s", where, text)
}

// The TypeScript SDK's own OAuth client connects to a fresh 'serve http
// --public-url' end to end, registering both ways (dynamic registration,
// and a client ID metadata document on a TLS server of the test): it
// discovers the authorization server from the 401, a real Chromium signs
// in at an OpenID provider running in the test and allows on warren's
// consent page (no CSP violation), the client gets a token, calls a tool
// that runs in a jail, refreshes by itself after the token expires, and
// after revoking its refresh token is refused and asked to authorize again.
func TestRemoteClientSignsInWithOAuth(t *testing.T) {
	needJail(t)
	script := installSDK(t)
	idp := oauthtest.NewProvider(t, "")
	idp.AskName()
	doc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		// A loopback redirect URI matches on any port: the client
		// listens where it can.
		_ = json.NewEncoder(w).Encode(map[string]any{"client_id": "https://" + r.Host + r.URL.Path, "client_name": "SDK Document Client",
			"redirect_uris": []string{"http://127.0.0.1/callback"}, "token_endpoint_auth_method": "none",
			"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"}})
	}))
	t.Cleanup(doc.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: doc.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}

	addr := freeAddr(t)
	data := jailDir(t)
	const ttl = 5 * time.Second
	srv := serveHTTPWithEnv(t, []string{"WARREN_OIDC_CLIENT_SECRET=" + oauthtest.ClientSecret},
		"--addr", addr, "--data-dir", data, "--public-url", "http://"+addr,
		"--oidc-issuer", idp.URL, "--oidc-client-id", oauthtest.ClientID, "--oidc-allow", "@example.com",
		"--oauth-access-ttl", ttl.String(), "--oauth-test-fetch-ca", ca)

	for _, c := range []struct {
		name, page string
		args       []string
	}{
		{"dynamic registration", "SDK Test Client", nil},
		{"client ID metadata document", "SDK Document Client", []string{doc.URL + "/client.json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := runSDKClient(t, script, append([]string{srv.url, strconv.FormatInt((ttl + 2*time.Second).Milliseconds(), 10)}, c.args...)...)
			ev := client.next("authorize")
			signInAndApprove(t, ev["url"].(string), c.page)
			ev = client.next("authorized")
			if id, _ := ev["client_id"].(string); (len(c.args) > 0) != strings.HasPrefix(id, "https://") {
				t.Errorf("client_id %q: registered the wrong way", id)
			}
			if ev := client.next("called"); ev["out"] == nil || !strings.Contains(ev["out"].(string), "via-oauth") {
				t.Fatalf("shell_exec through OAuth: %v", ev)
			}
			ev = client.next("refreshed")
			if ev["changed"] != true || !strings.Contains(ev["out"].(string), "after-refresh") || ev["redirects"] != float64(1) {
				t.Fatalf("after the access token expired: %v (want a refreshed token, the call done, no new authorization)", ev)
			}
			// Revoked: the call is refused, the refresh fails, and the
			// client asks the person to authorize again.
			client.next("authorize")
			ev = client.next("revoked")
			if ev["status"] != float64(200) || ev["refused"] == "" || ev["redirects"] != float64(2) {
				t.Fatalf("after revocation: %v (want the call refused and a new authorization asked for)", ev)
			}
		})
	}
	// The operator sees both grants, ended by the clients' revocations.
	out, err := exec.Command(warrenBin, "oauth", "ls", "--data-dir", data).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SDK Test Client") || !strings.Contains(string(out), "SDK Document Client") ||
		strings.Count(string(out), "alice@example.com") != 2 || strings.Contains(string(out), "active") {
		t.Fatalf("warren oauth ls: %v\n%s", err, out)
	}
}

// serveHTTPWithEnv is serveHTTP with extra environment variables (a
// secret that must not be in argv).
func serveHTTPWithEnv(t *testing.T, env []string, args ...string) *httpServer {
	t.Helper()
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		t.Setenv(k, v)
	}
	return serveHTTP(t, args...)
}
