package oauth_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/warrenhq/warren/web"
)

// On a single-user server (no upstream provider), approving needs the web
// console's sign-in in the same browser: its cookie and the console key
// the consent page's script copies from the console's storage. Without
// them, or with another key, nothing is approved.
func TestSingleUserApprovesWithTheConsoleSignIn(t *testing.T) {
	w := newWarren(t, warrenOpts{withConsole: true})
	a := w.newApp("http://127.0.0.1:9/cb")
	verifier, challenge := pkce("m")
	b := newBrowser(t, a.redirect)

	status, _, page := b.get(a.authorizeURL(w, challenge, "s"))
	if status != http.StatusOK || !strings.Contains(page, "web console in this browser") || !strings.Contains(page, "consent.js") {
		t.Fatalf("consent page: %d %s", status, page)
	}
	if status, loc, _ := b.submit(w.url, page, "approve", nil); status != http.StatusForbidden || loc != "" {
		t.Fatalf("approve without the console's sign-in: %d %q, want 403", status, loc)
	}

	// The person opens the printed console link in this browser.
	link := w.console.LoginURL(w.url, "owner")
	code := link[strings.Index(link, "#code=")+len("#code="):]
	req, _ := http.NewRequest("POST", w.url+web.LoginPath, strings.NewReader(`{"code":"`+code+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", w.url)
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var login struct{ Key string }
	_ = json.NewDecoder(resp.Body).Decode(&login)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || login.Key == "" {
		t.Fatalf("console sign-in: %d", resp.StatusCode)
	}

	if status, loc, _ := b.submit(w.url, page, "approve", url.Values{"console_key": {"not-the-key"}}); status != http.StatusForbidden || loc != "" {
		t.Fatalf("approve with a wrong console key: %d %q, want 403", status, loc)
	}
	other := newBrowser(t, a.redirect) // the key, but not the cookie
	if status, loc, _ := other.submit(w.url, page, "approve", url.Values{"console_key": {login.Key}}); status == http.StatusSeeOther {
		t.Fatalf("approve from a browser without the console's cookie: %d %q", status, loc)
	}
	status, loc, body := b.submit(w.url, page, "approve", url.Values{"console_key": {login.Key}})
	u, _ := url.Parse(loc)
	if status != http.StatusSeeOther || u.Query().Get("code") == "" {
		t.Fatalf("approve with the console's sign-in: %d %q %s", status, loc, body)
	}
	status, tok := w.redeem(a, u.Query().Get("code"), verifier)
	if status != http.StatusOK {
		t.Fatalf("redeem: %d %v", status, tok)
	}
	if status, _ := w.mcpCall(tok["access_token"].(string)); status != http.StatusOK {
		t.Fatalf("/mcp: %d", status)
	}
	var user string
	if err := w.db.QueryRow(`SELECT user FROM oauth_tokens WHERE kind = 'access'`).Scan(&user); err != nil || user != "owner" {
		t.Fatalf("the token's user is %q (%v), want the console's user owner", user, err)
	}
}
