package oauth_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/mcp/oauth"
)

func getJSON(t *testing.T, u string) map[string]any {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A client without a token learns from the 401 where the protected
// resource's metadata is, and from that which authorization server to
// use; the server's metadata offers PKCE S256 only, both ways of
// registering, and iss in the redirect. Personal access tokens still work.
func TestUnauthorizedNamesTheResourceMetadata(t *testing.T) {
	w := newWarren(t, warrenOpts{})
	status, challenge := w.mcpCall("")
	want := `resource_metadata="` + w.url + `/.well-known/oauth-protected-resource/mcp"`
	if status != http.StatusUnauthorized || !strings.Contains(challenge, want) {
		t.Fatalf("/mcp without a token: %d %q, want 401 with %s", status, challenge, want)
	}
	prm := getJSON(t, w.url+"/.well-known/oauth-protected-resource/mcp")
	if prm["resource"] != w.url+"/mcp" {
		t.Errorf("resource = %v, want %s", prm["resource"], w.url+"/mcp")
	}
	if as, _ := prm["authorization_servers"].([]any); len(as) != 1 || as[0] != w.url {
		t.Errorf("authorization_servers = %v, want [%s]", prm["authorization_servers"], w.url)
	}
	meta := getJSON(t, w.url+"/.well-known/oauth-authorization-server")
	if meta["issuer"] != w.url || meta["authorization_endpoint"] != w.url+"/authorize" || meta["token_endpoint"] != w.url+"/token" ||
		meta["registration_endpoint"] != w.url+"/register" || meta["revocation_endpoint"] != w.url+"/revoke" {
		t.Errorf("metadata endpoints: %v", meta)
	}
	if m, _ := meta["code_challenge_methods_supported"].([]any); len(m) != 1 || m[0] != "S256" {
		t.Errorf("code_challenge_methods_supported = %v, want [S256]", meta["code_challenge_methods_supported"])
	}
	if meta["client_id_metadata_document_supported"] != true || meta["authorization_response_iss_parameter_supported"] != true {
		t.Errorf("metadata does not offer client ID metadata documents and iss: %v", meta)
	}

	pat, _, err := w.tokens.Create(context.Background(), "carol")
	if err != nil {
		t.Fatal(err)
	}
	if status, _ := w.mcpCall(pat); status != http.StatusOK {
		t.Fatalf("a personal access token: %d, want 200", status)
	}
	if status, challenge := w.mcpCall("wat_not-a-real-token"); status != http.StatusUnauthorized || !strings.Contains(challenge, `error="invalid_token"`) {
		t.Fatalf("a made-up access token: %d %q", status, challenge)
	}
}

// The whole flow: registration, sign-in at the upstream provider,
// consent, code with PKCE, an access token that works on /mcp until it
// expires, a refresh that rotates, and revocation.
func TestSignInApproveUseRefreshRevoke(t *testing.T) {
	w := newWarren(t, warrenOpts{})
	a := w.newApp("http://127.0.0.1:9/callback")
	verifier, challenge := pkce("a")
	b := newBrowser(t, a.redirect)

	status, _, page := b.get(a.authorizeURL(w, challenge, "state-1"))
	if status != http.StatusOK {
		t.Fatalf("authorize: %d %s", status, page)
	}
	if w.idp.SignIns() != 1 {
		t.Fatalf("the browser signed in at the provider %d times, want 1", w.idp.SignIns())
	}
	for _, want := range []string{"Test Agent", "alice@example.com", "http://127.0.0.1:9/callback", "its own claim"} {
		if !strings.Contains(page, want) {
			t.Errorf("the consent page does not show %q:\n%s", want, page)
		}
	}
	status, loc, body := b.submit(w.url, page, "approve", nil)
	if status != http.StatusSeeOther {
		t.Fatalf("approve: %d %s", status, body)
	}
	u, _ := url.Parse(loc)
	q := u.Query()
	if !strings.HasPrefix(loc, a.redirect+"?") || q.Get("state") != "state-1" || q.Get("iss") != w.url || q.Get("code") == "" {
		t.Fatalf("approve redirected to %s, want %s with code, state and iss", loc, a.redirect)
	}
	status, tok := w.redeem(a, q.Get("code"), verifier)
	if status != http.StatusOK || tok["token_type"] != "Bearer" || tok["refresh_token"] == nil {
		t.Fatalf("redeem: %d %v", status, tok)
	}
	access := tok["access_token"].(string)
	if status, _ := w.mcpCall(access); status != http.StatusOK {
		t.Fatalf("/mcp with the access token: %d", status)
	}
	var stored int
	if err := w.db.QueryRow(`SELECT COUNT(*) FROM oauth_tokens WHERE hash = ? OR hash = ?`, access, tok["refresh_token"]).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("a token is stored as itself (%d rows, %v): only hashes may be kept", stored, err)
	}

	// A second authorization in the same browser needs no new sign-in.
	if status, _, page := b.get(a.authorizeURL(w, challenge, "state-2")); status != http.StatusOK || !strings.Contains(page, "alice@example.com") || w.idp.SignIns() != 1 {
		t.Fatalf("second authorization: %d, sign-ins %d", status, w.idp.SignIns())
	}

	// Expiry, then a refresh that rotates.
	w.clock.advance(2 * time.Minute)
	if status, challenge := w.mcpCall(access); status != http.StatusUnauthorized || !strings.Contains(challenge, "invalid_token") {
		t.Fatalf("/mcp with an expired access token: %d %q", status, challenge)
	}
	refresh := tok["refresh_token"].(string)
	status, tok2 := w.tokenCall(oauth.TokenPath, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {a.id}})
	if status != http.StatusOK || tok2["refresh_token"] == refresh {
		t.Fatalf("refresh: %d %v (the refresh token must rotate)", status, tok2)
	}
	if status, _ := w.mcpCall(tok2["access_token"].(string)); status != http.StatusOK {
		t.Fatalf("/mcp with the refreshed access token: %d", status)
	}

	// Revoking the refresh token ends the authorization: its access token
	// stops working at once.
	status, _ = w.tokenCall(oauth.RevokePath, url.Values{"token": {tok2["refresh_token"].(string)}, "client_id": {a.id}})
	if status != http.StatusOK {
		t.Fatalf("revoke: %d", status)
	}
	if status, _ := w.mcpCall(tok2["access_token"].(string)); status != http.StatusUnauthorized {
		t.Fatalf("/mcp after revocation: %d, want 401", status)
	}
	status, out := w.tokenCall(oauth.TokenPath, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok2["refresh_token"].(string)}, "client_id": {a.id}})
	if status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Fatalf("refresh after revocation: %d %v", status, out)
	}
}

// A refresh token used twice (a copy leaked) revokes the whole family:
// the thief's and the owner's tokens alike.
func TestRefreshTokenReuseRevokesTheFamily(t *testing.T) {
	w := newWarren(t, warrenOpts{})
	a, tok := w.fullFlow("http://localhost:8123/cb")
	first := tok["refresh_token"].(string)
	status, tok2 := w.tokenCall(oauth.TokenPath, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first}, "client_id": {a.id}})
	if status != http.StatusOK {
		t.Fatalf("refresh: %d %v", status, tok2)
	}
	status, out := w.tokenCall(oauth.TokenPath, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first}, "client_id": {a.id}})
	if status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Fatalf("reuse of a rotated refresh token: %d %v, want invalid_grant", status, out)
	}
	if status, _ := w.mcpCall(tok2["access_token"].(string)); status != http.StatusUnauthorized {
		t.Fatalf("the family's newest access token after reuse: %d, want 401", status)
	}
	status, _ = w.tokenCall(oauth.TokenPath, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok2["refresh_token"].(string)}, "client_id": {a.id}})
	if status != http.StatusBadRequest {
		t.Fatalf("the family's newest refresh token after reuse: %d, want 400", status)
	}
}

// A person the allow list does not name cannot sign in; one whose email
// the provider did not verify cannot either.
func TestUpstreamAllowList(t *testing.T) {
	w := newWarren(t, warrenOpts{})
	a := w.newApp("http://127.0.0.1:9/cb")
	_, challenge := pkce("b")
	for _, c := range []struct {
		user     string
		verified bool
		status   int
	}{{"mallory@evil.test", true, http.StatusForbidden}, {"alice@example.com.evil.test", true, http.StatusForbidden},
		{"eve@example.com", false, http.StatusBadGateway}, {"bob@partner.test", true, http.StatusOK}} {
		w.idp.SetUser(c.user, c.verified)
		status, _, page := newBrowser(t, a.redirect).get(a.authorizeURL(w, challenge, "s"))
		if status != c.status {
			t.Errorf("%s (verified %v): %d, want %d: %s", c.user, c.verified, status, c.status, page)
		}
	}
}

// A person taken off the allow list keeps nothing: the server restarted
// with the shorter list refuses their refresh, and revokes what they hold.
func TestRefreshRefusedWhenNoLongerAllowed(t *testing.T) {
	db := openDB(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	w := newWarren(t, warrenOpts{db: db, listener: ln})
	a, tok := w.fullFlow("http://127.0.0.1:9/cb")
	w.srv.Close()

	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	later := newWarren(t, warrenOpts{db: db, listener: ln, allow: []string{"bob@partner.test"}})
	status, out := later.tokenCall(oauth.TokenPath, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}, "client_id": {a.id}})
	if status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Fatalf("refresh by someone no longer allowed: %d %v, want invalid_grant", status, out)
	}
	if status, _ := later.mcpCall(tok["access_token"].(string)); status != http.StatusUnauthorized {
		t.Fatalf("their access token afterwards: %d, want 401", status)
	}
}

// A refresh token is refreshed only at the resource it was issued for:
// the same database under another public URL does not mint tokens for it.
func TestRefreshOnlyAtItsOwnResource(t *testing.T) {
	w := newWarren(t, warrenOpts{})
	a, tok := w.fullFlow("http://127.0.0.1:9/cb")
	other := newWarren(t, warrenOpts{db: w.db})
	status, out := other.tokenCall(oauth.TokenPath, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}, "client_id": {a.id}})
	if status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Fatalf("refresh at another resource: %d %v, want invalid_grant", status, out)
	}
}

// The operator lists grants (who, which client) and revokes one: its
// tokens stop working, the refresh too.
func TestOperatorListsAndRevokesGrants(t *testing.T) {
	w := newWarren(t, warrenOpts{})
	a, tok := w.fullFlow("http://127.0.0.1:9/cb")
	ctx := context.Background()
	grants, err := oauth.ListGrants(ctx, w.db, w.clock.now())
	if err != nil || len(grants) != 1 || grants[0].User != "alice@example.com" || grants[0].ClientName != "Test Agent" || !grants[0].Active {
		t.Fatalf("grants: %+v %v", grants, err)
	}
	if err := oauth.RevokeGrant(ctx, w.db, grants[0].ID[:3], w.clock.now()); err == nil {
		t.Fatal("a 3-character prefix was accepted")
	}
	if err := oauth.RevokeGrant(ctx, w.db, grants[0].ID[:8], w.clock.now()); err != nil {
		t.Fatal(err)
	}
	w.clock.advance(6 * time.Second) // past the server's 5 s trust in a checked token
	if status, _ := w.mcpCall(tok["access_token"].(string)); status != http.StatusUnauthorized {
		t.Fatalf("/mcp after the operator revoked the grant: %d", status)
	}
	status, out := w.tokenCall(oauth.TokenPath, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}, "client_id": {a.id}})
	if status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Fatalf("refresh after the operator revoked the grant: %d %v", status, out)
	}
	if grants, _ := oauth.ListGrants(ctx, w.db, w.clock.now()); len(grants) != 1 || grants[0].Active {
		t.Fatalf("after revocation: %+v, want the grant listed as ended", grants)
	}
}
