package web

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver"
	"github.com/rs/zerolog"

	"github.com/warrenhq/warren/mcp"
	"github.com/warrenhq/warren/mcp/tokens"
)

// site is a server with the console mounted, as 'warren serve http' runs it.
type site struct {
	t       *testing.T
	url     string
	console *Console
	tokens  *tokens.Store
	logs    *bytes.Buffer
	clock   *clock
}

// clock is the console's clock in tests: real time until a test moves it
// on, so that waiting out a limit takes no time.
type clock struct {
	mu   sync.Mutex
	skew time.Duration
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.skew)
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.skew += d
	c.mu.Unlock()
}

func newSite(t *testing.T) *site {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "warren.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := tokens.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	log := zerolog.New(logs)
	console, err := New(Options{Tokens: store, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{}
	console.logins.now = clk.now
	srv, err := mcp.New(mcp.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.HTTPHandler(mcp.HTTPOptions{Tokens: store, Console: console}))
	t.Cleanup(ts.Close)
	return &site{t: t, url: ts.URL, console: console, tokens: store, logs: logs, clock: clk}
}

// post sends body to path with the given Origin, cookie and bearer token
// ("" for none) and returns the status, the body and the session cookie it
// set, if any.
func (s *site) post(path, origin, cookie, bearer, body string) (int, string, *http.Cookie) {
	s.t.Helper()
	return s.postKey(path, origin, cookie, "", bearer, body)
}

// keyHeader is the header the console's page sends its key in: part of
// the wire protocol between web/src/mcp.ts and the server.
const keyHeader = "Warren-Console-Key"

// postKey is post with the console key header as well.
func (s *site) postKey(path, origin, cookie, key, bearer, body string) (int, string, *http.Cookie) {
	s.t.Helper()
	req, _ := http.NewRequest("POST", s.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
	}
	if key != "" {
		req.Header.Set(keyHeader, key)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var set *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == CookieName {
			set = c
		}
	}
	return resp.StatusCode, string(b), set
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"console","version":"1"}}}`

// The printed link's code signs a browser in once, with a cookie scripts
// cannot read and other sites cannot send, and a console key in the body
// of the answer (never in a cookie); /mcp takes the cookie only with its
// key and only from the console's own origin; signing out ends the session
// on the server.
func TestCodeLoginCookieAndLogout(t *testing.T) {
	s := newSite(t)
	link := s.console.LoginURL(s.url, "alice")
	code, ok := strings.CutPrefix(link, s.url+"/#code=")
	if !ok || len(code) < 40 {
		t.Fatalf("login link %q: want the code in the fragment", link)
	}
	own := s.url

	if status, _, _ := s.post(LoginPath, "http://localhost:1", "", "", `{"code":"`+code+`"}`); status != http.StatusForbidden {
		t.Fatalf("sign-in from another origin: %d", status)
	}
	status, answer, ck := s.post(LoginPath, own, "", "", `{"code":"`+code+`"}`)
	var signedIn struct{ Key string }
	if err := json.Unmarshal([]byte(answer), &signedIn); status != http.StatusOK || ck == nil || err != nil || len(signedIn.Key) < 40 {
		t.Fatalf("sign-in with the code: %d %s, cookie %v", status, answer, ck)
	}
	key := signedIn.Key
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/", ck)
	}
	if ck.Value == key || strings.Contains(ck.String(), key) {
		t.Fatal("the console key is in the cookie")
	}
	// Once only (even though the foreign attempt above failed, the code
	// was not spent by it: it was refused before being looked at).
	if status, body, _ := s.post(LoginPath, own, "", "", `{"code":"`+code+`"}`); status != http.StatusUnauthorized || !strings.Contains(body, "already used") {
		t.Fatalf("second use of the code: %d %s", status, body)
	}

	if status, body, _ := s.postKey("/mcp", own, ck.Value, key, "", initialize); status != http.StatusOK || !strings.Contains(body, `"serverInfo"`) {
		t.Fatalf("/mcp with the cookie and key from the console's origin: %d %s", status, body)
	}
	for _, origin := range []string{"", "http://localhost:1", "http://evil.example"} {
		if status, _, _ := s.postKey("/mcp", origin, ck.Value, key, "", initialize); status != http.StatusForbidden {
			t.Fatalf("/mcp with the cookie from origin %q: %d, want 403", origin, status)
		}
	}
	// An agent's bearer token works as before, with no cookie.
	tok, _, err := s.tokens.Create(context.Background(), "bob")
	if err != nil {
		t.Fatal(err)
	}
	if status, _, _ := s.post("/mcp", "", "", tok, initialize); status != http.StatusOK {
		t.Fatalf("/mcp with a bearer token: %d", status)
	}

	if status, _, cleared := s.postKey(LogoutPath, own, ck.Value, key, "", ""); status != http.StatusNoContent || cleared == nil || cleared.MaxAge >= 0 {
		t.Fatalf("sign-out: %d, cookie %+v", status, cleared)
	}
	if status, body, _ := s.postKey("/mcp", own, ck.Value, key, "", initialize); status != http.StatusUnauthorized || !strings.Contains(body, "sign in again") {
		t.Fatalf("/mcp with the cookie and key after sign-out: %d %s", status, body)
	}
	if strings.Contains(s.logs.String(), code) || strings.Contains(s.logs.String(), ck.Value) || strings.Contains(s.logs.String(), key) {
		t.Fatalf("a login secret is in the logs: %s", s.logs.String())
	}
}

// A pasted token signs in; revoking the token ends the console session.
func TestTokenLoginEndsWhenTheTokenIsRevoked(t *testing.T) {
	s := newSite(t)
	tok, info, err := s.tokens.Create(context.Background(), "carol")
	if err != nil {
		t.Fatal(err)
	}
	if status, body, _ := s.post(LoginPath, s.url, "", "", `{"token":"wrn_nope"}`); status != http.StatusUnauthorized || strings.Contains(body, "wrn_nope") {
		t.Fatalf("a bad token: %d %s", status, body)
	}
	cookie, key := s.signIn(`{"token":" ` + tok + ` "}`)
	if ok, body := s.works(cookie, key); !ok {
		t.Fatalf("/mcp after a token sign-in: %s", body)
	}
	if err := s.tokens.Revoke(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	for range 2 { // every later request says why, not only the first
		if status, body, _ := s.postKey("/mcp", s.url, cookie, key, "", initialize); status != http.StatusUnauthorized || !strings.Contains(body, "revoked") {
			t.Fatalf("/mcp after the token was revoked: %d %s", status, body)
		}
	}
	if strings.Contains(s.logs.String(), tok) {
		t.Fatal("the token is in the logs")
	}
}

// The pages are served with a policy that allows no inline script and
// nothing from other hosts.
func TestPagesCarryASecurityPolicy(t *testing.T) {
	s := newSite(t)
	resp, err := http.Get(s.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != 200 || !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe-inline") ||
		!strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("GET /: %d, CSP %q", resp.StatusCode, csp)
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatal("no nosniff")
	}
	for _, p := range []string{"/../go.mod", "/nothing.js", "/console/login"} {
		resp, err := http.Get(s.url + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatalf("GET %s: 200", p)
		}
	}
}

// With Options.Dir (serve http --console-dir) the files come from disk,
// read again on every request, so a rebuild shows without a restart.
func TestDevelopmentDirIsServedFromDisk(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) {
		if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("first build")
	c, err := New(Options{Dir: dir, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(c)
	defer ts.Close()
	for _, want := range []string{"first build", "second build"} {
		write(want)
		resp, err := http.Get(ts.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != want || resp.Header.Get("Cache-Control") != "no-cache" {
			t.Fatalf("GET / = %q (%s), want %q, not cached", b, resp.Header.Get("Cache-Control"), want)
		}
	}
}
