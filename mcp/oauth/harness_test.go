package oauth_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver"
	"github.com/rs/zerolog"

	"github.com/warrenhq/warren/mcp"
	"github.com/warrenhq/warren/mcp/oauth"
	"github.com/warrenhq/warren/mcp/oauth/oauthtest"
	"github.com/warrenhq/warren/mcp/tokens"
	"github.com/warrenhq/warren/web"
)

// warren is a server as 'warren serve http --public-url' runs it: the
// MCP endpoint, personal access tokens and the authorization server, on a
// real SQLite file, signing people in at a test OpenID provider.
type warren struct {
	t       *testing.T
	url     string
	db      *sql.DB
	tokens  *tokens.Store
	as      *oauth.Server
	idp     *oauthtest.Provider
	logs    *syncBuffer
	clock   *clock
	srv     *httptest.Server
	console *web.Console
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// clock is real time until a test moves it on.
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

type warrenOpts struct {
	fetch    oauth.FetchOptions
	db       *sql.DB
	listener net.Listener
	// withConsole: a single-user server, the web console's sign-in as
	// the login.
	withConsole bool
	// allow overrides the upstream allow list.
	allow []string
	// maxClients overrides oauth.DefaultMaxClients.
	maxClients int
}

func openDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "warren.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newWarren(t *testing.T, o warrenOpts) *warren {
	t.Helper()
	db := o.db
	if db == nil {
		db = openDB(t)
	}
	ctx := context.Background()
	store, err := tokens.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := zerolog.New(logs)
	ln := o.listener
	if ln == nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	w := &warren{t: t, url: "http://" + ln.Addr().String(), db: db, tokens: store, logs: logs, clock: &clock{}}
	opts := oauth.Options{PublicURL: w.url, Fetch: o.fetch, Log: log, Now: w.clock.now, AccessTTL: time.Minute, MaxClients: o.maxClients}
	httpOpts := mcp.HTTPOptions{Tokens: store}
	if o.withConsole {
		if w.console, err = web.New(web.Options{Tokens: store, Log: log}); err != nil {
			t.Fatal(err)
		}
		opts.Console, httpOpts.Console = w.console, w.console
	} else {
		w.idp = oauthtest.NewProvider(t, "alice@example.com")
		allow := o.allow
		if allow == nil {
			allow = []string{"@example.com", "bob@partner.test"}
		}
		opts.Upstream = &oauth.UpstreamConfig{Issuer: w.idp.URL, ClientID: oauthtest.ClientID, ClientSecret: oauthtest.ClientSecret, Allow: allow}
	}
	if w.as, err = oauth.New(ctx, db, opts); err != nil {
		t.Fatal(err)
	}
	srv, err := mcp.New(mcp.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	httpOpts.OAuth = w.as
	w.srv = httptest.NewUnstartedServer(srv.HTTPHandler(httpOpts))
	w.srv.Listener.Close()
	w.srv.Listener = ln
	w.srv.Start()
	t.Cleanup(w.srv.Close)
	return w
}

// browser is a person's browser: cookies, and redirects followed until
// they reach a client's redirect URI (which no server answers here).
type browser struct {
	t      *testing.T
	client *http.Client
}

func newBrowser(t *testing.T, stopAt string) *browser {
	jar, _ := cookiejar.New(nil)
	b := &browser{t: t}
	b.client = &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), stopAt) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	return b
}

// get opens u and returns the final response's status, location and body.
func (b *browser) get(u string) (int, string, string) {
	b.t.Helper()
	resp, err := b.client.Get(u)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(body)
}

// submit posts the consent form of page with action, from origin.
func (b *browser) submit(base, page, action string, extra url.Values) (int, string, string) {
	b.t.Helper()
	return b.submitFrom(base, base, page, action, extra)
}

// submitFrom is submit with the Origin header of another page.
func (b *browser) submitFrom(base, origin, page, action string, extra url.Values) (int, string, string) {
	b.t.Helper()
	form := formFields(page)
	for k, v := range extra {
		form[k] = v
	}
	form.Set("action", action)
	req, _ := http.NewRequest("POST", base+oauth.ConsentPath, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(body)
}

var inputRE = regexp.MustCompile(`<input type="hidden"(?: id="[^"]*")? name="([^"]+)" value="([^"]*)">`)

func formFields(page string) url.Values {
	v := url.Values{}
	for _, m := range inputRE.FindAllStringSubmatch(page, -1) {
		v.Set(m[1], m[2])
	}
	return v
}

// pkce returns a verifier and its S256 challenge.
func pkce(seed string) (verifier, challenge string) {
	verifier = strings.Repeat(seed, 64)[:64]
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// app is an MCP client: registered, with its redirect URI.
type app struct {
	id, secret, redirect string
}

func (w *warren) register(body string) (int, map[string]any) {
	w.t.Helper()
	resp, err := http.Post(w.url+oauth.RegisterPath, "application/json", strings.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (w *warren) newApp(redirect string) app {
	w.t.Helper()
	status, out := w.register(`{"client_name":"Test Agent","redirect_uris":["` + redirect + `"],"token_endpoint_auth_method":"none",
		"grant_types":["authorization_code","refresh_token"],"response_types":["code"]}`)
	if status != http.StatusCreated {
		w.t.Fatalf("register: %d %v", status, out)
	}
	return app{id: out["client_id"].(string), redirect: redirect}
}

func (a app) authorizeURL(w *warren, challenge, state string) string {
	q := url.Values{"response_type": {"code"}, "client_id": {a.id}, "redirect_uri": {a.redirect},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "state": {state}, "resource": {w.url + "/mcp"}, "scope": {"mcp"}}
	return w.url + oauth.AuthorizePath + "?" + q.Encode()
}

// tokenCall posts form to the token (or revocation) endpoint.
func (w *warren) tokenCall(path string, form url.Values) (int, map[string]any) {
	w.t.Helper()
	resp, err := http.PostForm(w.url+path, form)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// approve runs the browser side of an authorization: sign in at the
// provider, approve on the consent page; it returns the code and the
// redirect's query.
func (w *warren) approve(b *browser, a app, challenge, state string) url.Values {
	w.t.Helper()
	status, _, page := b.get(a.authorizeURL(w, challenge, state))
	if status != http.StatusOK || !strings.Contains(page, "Allow") {
		w.t.Fatalf("consent page: %d %s", status, page)
	}
	status, loc, body := b.submit(w.url, page, "approve", nil)
	if status != http.StatusSeeOther {
		w.t.Fatalf("approve: %d %s", status, body)
	}
	u, err := url.Parse(loc)
	if err != nil || !strings.HasPrefix(loc, a.redirect) {
		w.t.Fatalf("approve redirected to %q, not to the client's %s", loc, a.redirect)
	}
	return u.Query()
}

func (w *warren) redeem(a app, code, verifier string) (int, map[string]any) {
	return w.tokenCall(oauth.TokenPath, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {a.id},
		"redirect_uri": {a.redirect}, "code_verifier": {verifier}, "resource": {w.url + "/mcp"}})
}

// mcpCall sends initialize to /mcp with tok and returns the status and
// the WWW-Authenticate header.
func (w *warren) mcpCall(tok string) (int, string) {
	w.t.Helper()
	req, _ := http.NewRequest("POST", w.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// fullFlow registers an app and returns it with a fresh token answer.
func (w *warren) fullFlow(redirect string) (app, map[string]any) {
	w.t.Helper()
	a := w.newApp(redirect)
	verifier, challenge := pkce("v")
	q := w.approve(newBrowser(w.t, redirect), a, challenge, "st")
	status, tok := w.redeem(a, q.Get("code"), verifier)
	if status != http.StatusOK {
		w.t.Fatalf("redeem: %d %v", status, tok)
	}
	return a, tok
}
