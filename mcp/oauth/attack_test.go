package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/warrenhq/warren/mcp/oauth"
)

// No code is issued without PKCE: an authorization request without a
// code_challenge, or with the plain method, is answered with an error at
// the client's redirect URI before any sign-in; a code redeemed with the
// wrong verifier gives no token.
func TestNoCodeWithoutPKCE(t *testing.T) {
	w := newWarren(t, warrenOpts{})
	a := w.newApp("http://127.0.0.1:9/cb")
	verifier, challenge := pkce("c")
	for name, q := range map[string]url.Values{
		"no challenge": {"response_type": {"code"}, "client_id": {a.id}, "redirect_uri": {a.redirect}, "state": {"s"}},
		"plain":        {"response_type": {"code"}, "client_id": {a.id}, "redirect_uri": {a.redirect}, "state": {"s"}, "code_challenge": {verifier}, "code_challenge_method": {"plain"}},
		"no method":    {"response_type": {"code"}, "client_id": {a.id}, "redirect_uri": {a.redirect}, "state": {"s"}, "code_challenge": {challenge}},
	} {
		status, loc, _ := newBrowser(t, a.redirect).get(w.url + oauth.AuthorizePath + "?" + q.Encode())
		u, _ := url.Parse(loc)
		if status != http.StatusSeeOther || !strings.HasPrefix(loc, a.redirect) || u.Query().Get("error") != "invalid_request" || u.Query().Get("code") != "" {
			t.Errorf("%s: %d to %q, want a redirect with error=invalid_request and no code", name, status, loc)
		}
	}
	if n := w.idp.SignIns(); n != 0 {
		t.Errorf("requests without PKCE sent the browser to sign in %d times", n)
	}
	q := w.approve(newBrowser(t, a.redirect), a, challenge, "s")
	other, _ := pkce("d")
	if status, out := w.redeem(a, q.Get("code"), other); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Fatalf("a code with the wrong verifier: %d %v, want invalid_grant", status, out)
	}
	if status, out := w.redeem(a, q.Get("code"), ""); status != http.StatusBadRequest || out["access_token"] != nil {
		t.Fatalf("a code without a verifier: %d %v", status, out)
	}
}

// A code used twice (intercepted and replayed) revokes what its first use
// issued, and gives nothing the second time.
func TestCodeUsedTwiceRevokesWhatItIssued(t *testing.T) {
	w := newWarren(t, warrenOpts{})
	a := w.newApp("http://127.0.0.1:9/cb")
	verifier, challenge := pkce("e")
	q := w.approve(newBrowser(t, a.redirect), a, challenge, "s")
	status, tok := w.redeem(a, q.Get("code"), verifier)
	if status != http.StatusOK {
		t.Fatalf("first use: %d %v", status, tok)
	}
	if status, _ := w.mcpCall(tok["access_token"].(string)); status != http.StatusOK {
		t.Fatalf("/mcp: %d", status)
	}
	status, again := w.redeem(a, q.Get("code"), verifier)
	if status != http.StatusBadRequest || again["error"] != "invalid_grant" || again["access_token"] != nil {
		t.Fatalf("second use: %d %v, want invalid_grant", status, again)
	}
	if status, _ := w.mcpCall(tok["access_token"].(string)); status != http.StatusUnauthorized {
		t.Fatalf("the first use's access token after the second use: %d, want 401", status)
	}
	status, out := w.tokenCall(oauth.TokenPath, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}, "client_id": {a.id}})
	if status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Fatalf("the first use's refresh token after the second use: %d %v", status, out)
	}
}

// A redirect URI the client did not register is refused on warren's own
// page: the browser is not sent anywhere, so an attacker cannot collect a
// code (or even an error) at an address of its choosing. Registration
// refuses redirect URIs that are neither https nor loopback.
func TestUnregisteredRedirectURIRefusedBeforeAnyRedirect(t *testing.T) {
	w := newWarren(t, warrenOpts{})
	a := w.newApp("https://app.example/cb")
	_, challenge := pkce("f")
	for _, evil := range []string{"https://evil.example/cb", "https://app.example/cb/../evil", "https://app.example/cb?x=1", "http://127.0.0.1:9/cb"} {
		q := url.Values{"response_type": {"code"}, "client_id": {a.id}, "redirect_uri": {evil}, "state": {"s"},
			"code_challenge": {challenge}, "code_challenge_method": {"S256"}}
		status, loc, page := newBrowser(t, "https://").get(w.url + oauth.AuthorizePath + "?" + q.Encode())
		if status != http.StatusBadRequest || loc != "" || !strings.Contains(page, "not one of the redirect URIs") {
			t.Errorf("redirect_uri %s: %d, Location %q", evil, status, loc)
		}
	}
	if n := w.idp.SignIns(); n != 0 {
		t.Errorf("refused requests sent the browser to sign in %d times", n)
	}
	// An unknown client is refused the same way.
	status, loc, _ := newBrowser(t, "https://").get(w.url + oauth.AuthorizePath + "?client_id=nobody&redirect_uri=https%3A%2F%2Fevil.example%2F&response_type=code")
	if status != http.StatusBadRequest || loc != "" {
		t.Errorf("unknown client: %d, Location %q", status, loc)
	}
	for _, bad := range []string{"http://app.example/cb", "javascript:alert(1)", "https://app.example/cb#frag", "data:text/html,x"} {
		if status, out := w.register(`{"client_name":"x","redirect_uris":["` + bad + `"],"token_endpoint_auth_method":"none"}`); status != http.StatusBadRequest {
			t.Errorf("registering redirect URI %s: %d %v, want 400", bad, status, out)
		}
	}
	// Loopback redirect URIs match on any port (native apps).
	l := w.newApp("http://127.0.0.1:1234/cb")
	l.redirect = "http://127.0.0.1:5678/cb"
	if status, _, page := newBrowser(t, l.redirect).get(l.authorizeURL(w, challenge, "s")); status != http.StatusOK || !strings.Contains(page, "5678") {
		t.Errorf("a loopback redirect URI on another port: %d", status)
	}
}

// An access token is bound to the resource it was issued for: the same
// database served under another public URL (another resource) refuses
// it, and a client cannot ask for a token for another resource.
func TestTokenForAnotherResourceRefused(t *testing.T) {
	w := newWarren(t, warrenOpts{})
	first, tok := w.fullFlow("http://127.0.0.1:9/cb")
	access := tok["access_token"].(string)
	if status, _ := w.mcpCall(access); status != http.StatusOK {
		t.Fatalf("/mcp here: %d", status)
	}
	other := newWarren(t, warrenOpts{db: w.db})
	if status, challenge := other.mcpCall(access); status != http.StatusUnauthorized || !strings.Contains(challenge, "invalid_token") {
		t.Fatalf("the token at another resource: %d %q, want 401", status, challenge)
	}

	a := w.newApp("http://127.0.0.1:9/cb")
	_, challenge := pkce("g")
	u := a.authorizeURL(w, challenge, "s")
	u = strings.Replace(u, url.QueryEscape(w.url+"/mcp"), url.QueryEscape("https://other.example/mcp"), 1)
	status, loc, _ := newBrowser(t, a.redirect).get(u)
	lu, _ := url.Parse(loc)
	if status != http.StatusSeeOther || lu.Query().Get("error") != "invalid_target" {
		t.Fatalf("authorize for another resource: %d %q, want invalid_target", status, loc)
	}
	status, out := w.tokenCall(oauth.TokenPath, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)},
		"client_id": {first.id}, "resource": {"https://other.example/mcp"}})
	if status == http.StatusOK {
		t.Fatalf("refresh for another resource: %d %v", status, out)
	}
}

// CSRF on the consent page fails: an answer with the wrong token, from
// another origin, or from a browser that did not start the request issues
// no code; the real page's answer still works afterwards.
func TestConsentCSRFFails(t *testing.T) {
	w := newWarren(t, warrenOpts{})
	a := w.newApp("http://127.0.0.1:9/cb")
	_, challenge := pkce("h")
	b := newBrowser(t, a.redirect)
	status, _, page := b.get(a.authorizeURL(w, challenge, "s"))
	if status != http.StatusOK {
		t.Fatalf("consent page: %d", status)
	}
	if status, loc, _ := b.submit(w.url, page, "approve", url.Values{"csrf": {"forged"}}); status != http.StatusForbidden || loc != "" {
		t.Errorf("wrong CSRF token: %d %q, want 403", status, loc)
	}
	if status, loc, _ := b.submit(w.url, page, "approve", url.Values{"csrf": {""}}); status != http.StatusForbidden || loc != "" {
		t.Errorf("no CSRF token: %d %q, want 403", status, loc)
	}
	if status, loc, _ := b.submitFrom(w.url, "https://evil.example", page, "approve", nil); status != http.StatusForbidden || loc != "" {
		t.Errorf("another origin: %d %q, want 403", status, loc)
	}
	// The victim's browser, made to post an attacker's own request (the
	// attacker's form and token): no binding cookie, no sign-in.
	victim := newBrowser(t, a.redirect)
	if status, loc, _ := victim.submit(w.url, page, "approve", nil); status != http.StatusBadRequest || loc != "" {
		t.Errorf("another browser: %d %q, want 400", status, loc)
	}
	status, loc, _ := b.submit(w.url, page, "approve", nil)
	if status != http.StatusSeeOther || !strings.Contains(loc, "code=") {
		t.Fatalf("the real answer after the forgeries: %d %q", status, loc)
	}
	if status, loc, _ := b.submit(w.url, page, "approve", nil); status == http.StatusSeeOther {
		t.Fatalf("the same answer twice: %d %q", status, loc)
	}
}

// The consent page carries a strict policy: no inline script, no framing.
func TestConsentPagePolicy(t *testing.T) {
	w := newWarren(t, warrenOpts{})
	a := w.newApp("http://127.0.0.1:9/cb")
	_, challenge := pkce("i")
	resp, err := newBrowser(t, a.redirect).client.Get(a.authorizeURL(w, challenge, "s"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "form-action 'self'", "default-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q allows inline code", csp)
	}
}

// A client's name is shown to people (the consent page) and operators
// ('warren oauth ls' in a terminal): terminal controls and bidirectional
// overrides in it are dropped at registration.
func TestClientNameCannotCarryTerminalControls(t *testing.T) {
	w := newWarren(t, warrenOpts{})
	status, out := w.register(`{"client_name":"Good\u001b[2J\u001b]0;pwned\u0007 App\u202e\u0000","redirect_uris":["http://127.0.0.1:9/cb"],"token_endpoint_auth_method":"none"}`)
	if status != http.StatusCreated {
		t.Fatalf("register: %d %v", status, out)
	}
	if name := out["client_name"].(string); name != "Good[2J]0;pwned App" {
		t.Fatalf("stored client name %q, want the controls dropped", name)
	}
}

// Two redemptions of one code racing (an intercepted code replayed at
// once): at most one gets tokens, and the loser's attempt revokes them.
func TestConcurrentCodeRedemptionsIssueAtMostOnce(t *testing.T) {
	w := newWarren(t, warrenOpts{})
	a := w.newApp("http://127.0.0.1:9/cb")
	verifier, challenge := pkce("p")
	q := w.approve(newBrowser(t, a.redirect), a, challenge, "s")
	type result struct {
		status int
		tok    map[string]any
	}
	results := make(chan result, 8)
	for range 8 {
		go func() {
			status, tok := w.redeem(a, q.Get("code"), verifier)
			results <- result{status, tok}
		}()
	}
	var issued []string
	for range 8 {
		r := <-results
		if r.status == http.StatusOK {
			issued = append(issued, r.tok["access_token"].(string))
		}
	}
	if len(issued) > 1 {
		t.Fatalf("%d concurrent redemptions of one code got tokens", len(issued))
	}
	for _, tok := range issued {
		if status, _ := w.mcpCall(tok); status != http.StatusUnauthorized {
			t.Fatalf("the token of a code redeemed several times still works: %d", status)
		}
	}
}
