package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/warrenhq/warren/sessions/bound"
)

// UpstreamConfig names the OpenID Connect provider people sign in at.
type UpstreamConfig struct {
	// Issuer is the provider's issuer URL (discovery at
	// Issuer/.well-known/openid-configuration).
	Issuer string
	// ClientID and ClientSecret are warren's registration at the provider,
	// with redirect URI PublicURL+"/oauth/callback".
	ClientID, ClientSecret string
	// Claim of the ID token that names the warren user; "" means "email".
	Claim string
	// Allow lists who may sign in: "@example.com" for a domain (of an
	// email claim), anything else for one user (the claim's value).
	// Required: a provider like Google signs in anyone with an account.
	Allow []string
	// HTTPClient, when set, is used to talk to the provider (tests).
	HTTPClient *http.Client
}

type upstream struct {
	cfg      UpstreamConfig
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
}

func newUpstream(ctx context.Context, cfg UpstreamConfig, callback string) (*upstream, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" {
		return nil, errors.New("--oidc-issuer and --oidc-client-id are both needed to sign people in upstream")
	}
	if len(cfg.Allow) == 0 {
		return nil, errors.New("--oidc-allow is required with --oidc-issuer: list the users (alice@example.com) or domains (@example.com) who may sign in; otherwise anyone with an account at the provider could")
	}
	if cfg.Claim == "" {
		cfg.Claim = "email"
	}
	if cfg.HTTPClient != nil {
		ctx = oidc.ClientContext(ctx, cfg.HTTPClient)
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("--oidc-issuer %s: discovery failed: %w", cfg.Issuer, err)
	}
	u := &upstream{cfg: cfg,
		oauth: oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, Endpoint: p.Endpoint(),
			RedirectURL: callback, Scopes: []string{oidc.ScopeOpenID, "email", "profile"}},
		verifier: p.Verifier(&oidc.Config{ClientID: cfg.ClientID}),
	}
	return u, nil
}

// authURL is where the browser signs in: code flow with PKCE, state and
// nonce.
func (u *upstream) authURL(state, nonce, verifier string) string {
	return u.oauth.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier))
}

// login exchanges the provider's code and returns the verified user.
func (u *upstream) login(ctx context.Context, code, verifier, nonce string) (string, error) {
	if u.cfg.HTTPClient != nil {
		ctx = context.WithValue(ctx, oauth2.HTTPClient, u.cfg.HTTPClient)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tok, err := u.oauth.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return "", fmt.Errorf("the identity provider refused the code: %w", err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok {
		return "", errors.New("the identity provider sent no ID token")
	}
	idt, err := u.verifier.Verify(ctx, raw)
	if err != nil {
		return "", fmt.Errorf("the identity provider's ID token did not verify: %w", err)
	}
	if idt.Nonce != nonce {
		return "", errors.New("the ID token's nonce is not this sign-in's")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return "", fmt.Errorf("read the ID token: %w", err)
	}
	user, _ := claims[u.cfg.Claim].(string)
	if user == "" {
		return "", fmt.Errorf("the ID token has no claim %q to name the user (--oidc-claim)", u.cfg.Claim)
	}
	if u.cfg.Claim == "email" {
		if v, ok := claims["email_verified"].(bool); ok && !v {
			return "", errors.New("the identity provider has not verified this email address")
		}
		user = strings.ToLower(user)
	}
	if len(user) > bound.Name || strings.IndexFunc(user, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0 {
		return "", fmt.Errorf("the claim %q is not usable as a user name (at most %d bytes, no spaces)", u.cfg.Claim, bound.Name)
	}
	if !u.allowed(user) {
		return "", &notAllowed{user: user}
	}
	return user, nil
}

type notAllowed struct{ user string }

func (e *notAllowed) Error() string {
	return fmt.Sprintf("%s may not use this warren: ask its operator to add you to --oidc-allow", e.user)
}

func (u *upstream) allowed(user string) bool {
	for _, a := range u.cfg.Allow {
		a = strings.ToLower(strings.TrimSpace(a))
		if strings.HasPrefix(a, "@") && strings.HasSuffix(strings.ToLower(user), a) && strings.Count(user, "@") == 1 {
			return true
		}
		if a == strings.ToLower(user) {
			return true
		}
	}
	return false
}

// callback is where the provider sends the browser back.
func (s *Server) callback(w http.ResponseWriter, r *http.Request) {
	if s.upstream == nil || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	idHash, req, err := s.loadRequest(r.Context(), r, "state_hash", q.Get("state"))
	if err != nil {
		s.requestError(w, err)
		return
	}
	if e := q.Get("error"); e != "" {
		_, _ = s.db.ExecContext(r.Context(), `DELETE FROM oauth_requests WHERE id_hash = ?`, idHash)
		s.redirectError(w, r, req, "access_denied", "the sign-in at the identity provider failed: "+bound.String(e, bound.Name))
		return
	}
	user, err := s.upstream.login(r.Context(), q.Get("code"), req.Verifier, req.Nonce)
	if err != nil {
		_, _ = s.db.ExecContext(r.Context(), `DELETE FROM oauth_requests WHERE id_hash = ?`, idHash)
		s.opts.Log.Info().Err(err).Msg("oauth: upstream sign-in refused")
		var na *notAllowed
		if errors.As(err, &na) {
			s.errorPage(w, http.StatusForbidden, "Not allowed", err.Error())
			return
		}
		s.errorPage(w, http.StatusBadGateway, "Sign-in failed", err.Error())
		return
	}
	// The state is used once; the request now carries the user.
	req.User, req.Verifier, req.Nonce = user, "", ""
	data := mustJSON(req)
	if _, err := s.db.ExecContext(r.Context(), `UPDATE oauth_requests SET state_hash = NULL, data = ? WHERE id_hash = ?`, data, idHash); err != nil {
		s.requestError(w, err)
		return
	}
	login := secret("")
	now := s.opts.Now()
	if _, err := s.db.ExecContext(r.Context(), `DELETE FROM oauth_logins WHERE expires_at < ?`, now.UnixMilli()); err != nil {
		s.requestError(w, err)
		return
	}
	if _, err := s.db.ExecContext(r.Context(), `INSERT INTO oauth_logins (hash, "user", expires_at) VALUES (?, ?, ?)`,
		hashOf(login), user, now.Add(loginTTL).UnixMilli()); err != nil {
		s.requestError(w, err)
		return
	}
	s.setCookie(w, loginCookie, login, int(loginTTL.Seconds()))
	s.opts.Log.Info().Str("user", user).Msg("oauth: signed in upstream")
	// The request id is in no URL yet; a new one, for the consent page,
	// replaces the hash kept under the old (which only this browser,
	// holding the binding cookie, can use anyway).
	id := secret("")
	if _, err := s.db.ExecContext(r.Context(), `UPDATE oauth_requests SET id_hash = ? WHERE id_hash = ?`, hashOf(id), idHash); err != nil {
		s.requestError(w, err)
		return
	}
	http.Redirect(w, r, ConsentPath+"?request="+id, http.StatusSeeOther)
}

// loginUser is the user of the browser's upstream sign-in, or "".
func (s *Server) loginUser(r *http.Request) string {
	ck, err := r.Cookie(s.cookieName(loginCookie))
	if err != nil || len(ck.Value) > 64 {
		return ""
	}
	var user string
	err = s.db.QueryRowContext(r.Context(), `SELECT "user" FROM oauth_logins WHERE hash = ? AND expires_at > ?`,
		hashOf(ck.Value), s.opts.Now().UnixMilli()).Scan(&user)
	if err != nil {
		return ""
	}
	if !s.upstream.allowed(user) { // the allow list may have shrunk since
		return ""
	}
	return user
}
