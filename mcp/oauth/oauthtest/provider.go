// Package oauthtest is an OpenID Connect provider for tests: it runs in
// the test (net/http/httptest), signs ID tokens with a key made there, and
// signs in whoever the test says the person at the browser is. Tests of
// package oauth and the end-to-end tests of cmd/warren use it; nothing
// else may.
package oauthtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Client id and secret of warren's registration at the Provider.
const (
	ClientID     = "warren-at-idp"
	ClientSecret = "idp-secret"
)

// Provider is an OpenID Connect provider running inside the test. By
// default the browser is redirected straight back, signed in as the
// Provider's user; with AskName, it shows a sign-in form where the person
// (a browser the test drives) types a name.
type Provider struct {
	URL    string
	t      testing.TB
	key    *rsa.PrivateKey
	signer jose.Signer

	mu       sync.Mutex
	user     string
	verified bool
	codes    map[string]providerCode
	// logins counts sign-ins, so a test sees whether warren sent the
	// browser here.
	logins  int
	askName bool
}

type providerCode struct {
	user, nonce, challenge, redirect string
}

// NewProvider starts a Provider that signs in user; it stops when the
// test ends.
func NewProvider(t testing.TB, user string) *Provider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "test-key"))
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{t: t, key: key, signer: signer, user: user, verified: true, codes: map[string]providerCode{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("/authorize", p.authorize)
	mux.HandleFunc("/token", p.token)
	mux.HandleFunc("/jwks", p.jwks)
	mux.HandleFunc("/login", p.login)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// SetUser says who signs in next, and whether the provider verified
// their email address.
func (p *Provider) SetUser(user string, verified bool) {
	p.mu.Lock()
	p.user, p.verified = user, verified
	p.mu.Unlock()
}

// AskName makes the sign-in a form where the person types a name.
func (p *Provider) AskName() {
	p.mu.Lock()
	p.askName = true
	p.mu.Unlock()
}

// SignIns counts the sign-ins so far.
func (p *Provider) SignIns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logins
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"issuer": p.URL, "authorization_endpoint": p.URL + "/authorize", "token_endpoint": p.URL + "/token",
		"jwks_uri": p.URL + "/jwks", "response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"}, "code_challenge_methods_supported": []string{"S256"},
	})
}

func (p *Provider) jwks(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &p.key.PublicKey, KeyID: "test-key", Algorithm: "RS256", Use: "sig"}}})
}

func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != ClientID || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" ||
		q.Get("nonce") == "" || q.Get("state") == "" || q.Get("response_type") != "code" {
		http.Error(w, "bad authorization request: "+r.URL.RawQuery, http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	ask, user := p.askName, p.user
	p.mu.Unlock()
	if ask {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = loginForm.Execute(w, template.URL("/login?"+q.Encode())) //nolint:gosec // the provider's own query
		return
	}
	p.finish(w, r, q, user)
}

var loginForm = template.Must(template.New("login").Parse(`<!doctype html><html><head><title>Test provider: sign in</title></head>
<body><h1>Sign in to the test provider</h1><form method="post" action="{{.}}">
<label>Email <input id="email" name="email" type="email"></label> <button id="sign-in" type="submit">Sign in</button></form></body></html>`))

func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.ParseForm() != nil || r.PostForm.Get("email") == "" {
		http.Error(w, "sign in with the form", http.StatusBadRequest)
		return
	}
	p.finish(w, r, r.URL.Query(), r.PostForm.Get("email"))
}

// finish signs user in and sends the browser back with a code.
func (p *Provider) finish(w http.ResponseWriter, r *http.Request, q url.Values, user string) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	code := base64.RawURLEncoding.EncodeToString(b[:])
	p.mu.Lock()
	p.codes[code] = providerCode{user: user, nonce: q.Get("nonce"), challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri")}
	p.logins++
	p.mu.Unlock()
	back, _ := url.Parse(q.Get("redirect_uri"))
	back.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}}.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	id, sec, ok := r.BasicAuth()
	if !ok {
		id, sec = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != ClientID || sec != ClientSecret {
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	}
	p.mu.Lock()
	c, found := p.codes[r.PostForm.Get("code")]
	delete(p.codes, r.PostForm.Get("code"))
	verified := p.verified
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if !found || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge || r.PostForm.Get("redirect_uri") != c.redirect {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
		return
	}
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{"iss": p.URL, "sub": "sub-" + c.user, "aud": ClientID, "iat": now.Unix(),
		"exp": now.Add(5 * time.Minute).Unix(), "nonce": c.nonce, "email": c.user, "email_verified": verified})
	jws, err := p.signer.Sign(claims)
	if err != nil {
		p.t.Error(err)
		return
	}
	idt, _ := jws.CompactSerialize()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "idp-access", "token_type": "Bearer", "expires_in": 300, "id_token": idt})
}
