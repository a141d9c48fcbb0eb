package oauth

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/warrenhq/warren/sessions/bound"
)

// authRequest is an authorization request as warren checked it, kept
// while the person signs in and decides.
type authRequest struct {
	ClientID    string `json:"client_id"`
	RedirectURI string `json:"redirect_uri"`
	State       string `json:"state,omitempty"`
	Challenge   string `json:"challenge"`
	Resource    string `json:"resource"`
	Scope       string `json:"scope"`
	// Binding is the hash of the browser's binding cookie: only the
	// browser that started the request can finish it.
	Binding string `json:"binding"`
	// CSRF is the consent form's token.
	CSRF string `json:"csrf"`
	// User, once the person signed in upstream.
	User string `json:"user,omitempty"`
	// Upstream login: PKCE verifier and nonce of warren's own request.
	Verifier string `json:"verifier,omitempty"`
	Nonce    string `json:"nonce,omitempty"`
}

const maxState = 1024

// codeKeep is how long a used or expired code is kept, so that a second
// use is recognised (and revokes what the first issued).
const codeKeep = 24 * time.Hour

var challengeRE = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// authorize is the authorization endpoint.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		s.errorPage(w, http.StatusMethodNotAllowed, "Use GET", "The authorization endpoint is opened in a browser, with GET.")
		return
	}
	q := r.URL.Query()
	if len(r.URL.RawQuery) > 3*maxURI+maxState {
		s.errorPage(w, http.StatusBadRequest, "Request too large", "The authorization request is longer than warren accepts.")
		return
	}
	// Until the client and its redirect URI are known good, errors are
	// shown here and never sent anywhere (OAuth 2.1 §4.1.2.1).
	c, err := s.client(r.Context(), q.Get("client_id"))
	if err != nil {
		var inv *errInvalid
		if errors.As(err, &inv) {
			s.errorPage(w, http.StatusBadRequest, "Unknown application", inv.msg)
			return
		}
		s.opts.Log.Error().Err(err).Msg("oauth: authorize")
		s.errorPage(w, http.StatusInternalServerError, "Server error", "The server log has the details.")
		return
	}
	redirect := q.Get("redirect_uri")
	if redirect == "" && len(c.RedirectURIs) == 1 {
		redirect = c.RedirectURIs[0]
	}
	if !c.redirectMatches(redirect) {
		s.errorPage(w, http.StatusBadRequest, "Redirect URI not registered",
			fmt.Sprintf("The application asked to be sent back to %q, which is not one of the redirect URIs it registered. Nothing was sent to it.",
				bound.String(redirect, bound.Reason)))
		return
	}
	req := authRequest{ClientID: c.ID, RedirectURI: redirect, State: q.Get("state"), Challenge: q.Get("code_challenge"),
		Resource: s.resource, Scope: Scope}
	fail := func(code, desc string) { s.redirectError(w, r, req, code, desc) }
	switch {
	case len(req.State) > maxState:
		req.State = ""
		fail("invalid_request", fmt.Sprintf("state longer than %d bytes", maxState))
	case q.Get("response_type") != "code":
		fail("unsupported_response_type", "response_type must be code")
	case req.Challenge == "":
		fail("invalid_request", "code_challenge is required: warren issues codes only with PKCE (S256)")
	case q.Get("code_challenge_method") != "S256":
		fail("invalid_request", "code_challenge_method must be S256")
	case !challengeRE.MatchString(req.Challenge):
		fail("invalid_request", "code_challenge must be the 43-character base64url SHA-256 of the verifier")
	case s.checkResource(q.Get("resource")) != nil:
		fail("invalid_target", s.checkResource(q.Get("resource")).Error())
	default:
		s.startLogin(w, r, c, req)
	}
}

// startLogin keeps the request and sends the browser on: to the upstream
// identity provider, or (signed in already, or on a single-user server)
// to the consent page.
func (s *Server) startLogin(w http.ResponseWriter, r *http.Request, c *Client, req authRequest) {
	binding := s.bindingCookie(w, r)
	req.Binding = hashOf(binding)
	req.CSRF = secret("")
	id := secret("")
	if s.upstream != nil {
		if user := s.loginUser(r); user != "" {
			req.User = user
		}
	}
	var state string
	if s.upstream != nil && req.User == "" {
		state = secret("")
		req.Verifier, req.Nonce = secret(""), secret("")
	}
	if err := s.saveRequest(r.Context(), id, state, req); err != nil {
		if errors.Is(err, errTooManyPending) {
			s.opts.Log.Warn().Msg("oauth: authorization refused: " + err.Error())
			s.errorPage(w, http.StatusServiceUnavailable, "Too many sign-ins in progress", "Try again in a few minutes.")
			return
		}
		s.opts.Log.Error().Err(err).Msg("oauth: keep authorization request")
		s.errorPage(w, http.StatusInternalServerError, "Server error", "The server log has the details.")
		return
	}
	if state != "" {
		http.Redirect(w, r, s.upstream.authURL(state, req.Nonce, req.Verifier), http.StatusFound)
		return
	}
	s.consentPage(w, c, id, req)
}

func (s *Server) saveRequest(ctx context.Context, id, state string, req authRequest) error {
	data, _ := json.Marshal(req)
	now := s.opts.Now()
	if _, err := s.db.ExecContext(ctx, `DELETE FROM oauth_requests WHERE expires_at < ?`, now.UnixMilli()); err != nil {
		return err
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM oauth_requests`).Scan(&n); err != nil {
		return err
	}
	if n >= maxPending {
		return errTooManyPending
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO oauth_requests (id_hash, state_hash, data, expires_at) VALUES (?, ?, ?, ?)`,
		hashOf(id), nullable(stateKey(state)), string(data), now.Add(requestTTL).UnixMilli())
	return err
}

// maxPending bounds the authorization requests kept (anyone may start
// one); they expire after requestTTL.
const maxPending = 10000

var errTooManyPending = fmt.Errorf("%d authorization requests are pending, as many as warren keeps", maxPending)

func stateKey(state string) string {
	if state == "" {
		return ""
	}
	return hashOf(state)
}

// loadRequest returns a pending request by id, checked against the
// browser's binding cookie.
func (s *Server) loadRequest(ctx context.Context, r *http.Request, where, key string) (string, authRequest, error) {
	var idHash, data string
	err := s.db.QueryRowContext(ctx, `SELECT id_hash, data FROM oauth_requests WHERE `+where+` = ? AND expires_at > ?`,
		hashOf(key), s.opts.Now().UnixMilli()).Scan(&idHash, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return "", authRequest{}, errExpired
	}
	if err != nil {
		return "", authRequest{}, err
	}
	var req authRequest
	if err := json.Unmarshal([]byte(data), &req); err != nil {
		return "", authRequest{}, err
	}
	ck, err := r.Cookie(s.cookieName(bindingCookie))
	if err != nil || subtle.ConstantTimeCompare([]byte(hashOf(ck.Value)), []byte(req.Binding)) != 1 {
		return "", authRequest{}, errOtherBrowser
	}
	return idHash, req, nil
}

var (
	errExpired      = errors.New("this authorization request has expired or was already answered: start again from the application")
	errOtherBrowser = errors.New("this authorization request was started in another browser (or its cookie is gone): start again from the application")
)

// redirectError sends an error back to the client's redirect URI.
func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, req authRequest, code, desc string) {
	v := url.Values{"error": {code}, "error_description": {desc}}
	s.redirectBack(w, r, req, v)
}

// redirectBack sends the browser to the client's redirect URI with v, the
// state, and iss (RFC 9207, so that a client that talks to several
// servers knows which one answered).
func (s *Server) redirectBack(w http.ResponseWriter, r *http.Request, req authRequest, v url.Values) {
	if req.State != "" {
		v.Set("state", req.State)
	}
	v.Set("iss", s.issuer)
	u, _ := url.Parse(req.RedirectURI) // checked at registration
	q := u.Query()
	for k, vs := range v {
		q[k] = vs
	}
	u.RawQuery = q.Encode()
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// consent serves the consent page (GET, after an upstream login) and
// takes the person's answer (POST).
func (s *Server) consent(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		id := r.URL.Query().Get("request")
		_, req, err := s.loadRequest(r.Context(), r, "id_hash", id)
		if err != nil {
			s.requestError(w, err)
			return
		}
		c, err := s.client(r.Context(), req.ClientID)
		if err != nil {
			s.errorPage(w, http.StatusBadRequest, "Unknown application", err.Error())
			return
		}
		s.consentPage(w, c, id, req)
	case http.MethodPost:
		s.decide(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		s.errorPage(w, http.StatusMethodNotAllowed, "Use the consent page", "Answer on the consent page.")
	}
}

func (s *Server) requestError(w http.ResponseWriter, err error) {
	if errors.Is(err, errExpired) || errors.Is(err, errOtherBrowser) {
		s.errorPage(w, http.StatusBadRequest, "Authorization request not found", err.Error())
		return
	}
	s.opts.Log.Error().Err(err).Msg("oauth: consent")
	s.errorPage(w, http.StatusInternalServerError, "Server error", "The server log has the details.")
}

// decide takes the answer of the consent form: it must come from this
// origin, from the browser that started the request, with the form's
// CSRF token, from the person signed in.
func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		s.errorPage(w, http.StatusBadRequest, "Bad form", "The consent form could not be read.")
		return
	}
	if o := r.Header.Get("Origin"); o != "" && o != s.issuer {
		s.errorPage(w, http.StatusForbidden, "Refused", "The answer did not come from warren's own consent page.")
		return
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		s.errorPage(w, http.StatusForbidden, "Refused", "The answer did not come from warren's own consent page.")
		return
	}
	idHash, req, err := s.loadRequest(r.Context(), r, "id_hash", r.PostForm.Get("request"))
	if err != nil {
		s.requestError(w, err)
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(req.CSRF)) != 1 {
		s.errorPage(w, http.StatusForbidden, "Refused", "The consent form's token is wrong: reload the page from the application and answer again.")
		return
	}
	user, err := s.consentUser(r, req)
	if err != nil {
		s.errorPage(w, http.StatusForbidden, "Not signed in", err.Error())
		return
	}
	// The request is answered once, whatever the answer.
	res, err := s.db.ExecContext(r.Context(), `DELETE FROM oauth_requests WHERE id_hash = ?`, idHash)
	if err != nil {
		s.requestError(w, err)
		return
	}
	if n, _ := res.RowsAffected(); n == 0 {
		s.requestError(w, errExpired)
		return
	}
	if r.PostForm.Get("action") != "approve" {
		s.opts.Log.Info().Str("client_id", req.ClientID).Str("user", user).Msg("oauth: access denied by the user")
		s.redirectError(w, r, req, "access_denied", "the person declined")
		return
	}
	code := secret(codePrefix)
	family := secret("")[:22]
	now := s.opts.Now()
	if _, err := s.db.ExecContext(r.Context(), `INSERT INTO oauth_codes (hash, family, client_id, "user", redirect_uri, challenge, resource, scope, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, hashOf(code), family, req.ClientID, user, req.RedirectURI, req.Challenge, req.Resource, req.Scope,
		now.Add(codeTTL).UnixMilli()); err != nil {
		s.requestError(w, err)
		return
	}
	if _, err := s.db.ExecContext(r.Context(), `DELETE FROM oauth_codes WHERE expires_at < ?`, now.Add(-codeKeep).UnixMilli()); err != nil {
		s.opts.Log.Warn().Err(err).Msg("oauth: prune codes")
	}
	s.opts.Log.Info().Str("client_id", req.ClientID).Str("user", user).Msg("oauth: access approved")
	s.redirectBack(w, r, req, url.Values{"code": {code}})
}

// consentUser is who approves: the person signed in upstream in this
// browser (the same as when the request was made), or on a single-user
// server the console's user, proved by its cookie and key.
func (s *Server) consentUser(r *http.Request, req authRequest) (string, error) {
	if s.upstream != nil {
		user := s.loginUser(r)
		if user == "" || user != req.User {
			return "", errors.New("sign in again: start from the application")
		}
		return user, nil
	}
	key := r.PostForm.Get("console_key")
	if key == "" {
		return "", errors.New("sign in to warren's web console in this browser first (open the link 'warren serve http' printed), then start again from the application")
	}
	user, err := s.opts.Console.ConsoleUser(r, key)
	if err != nil || user == "" {
		return "", fmt.Errorf("the console's sign-in in this browser did not work (%v): sign in to the console again, then start again from the application", err)
	}
	return user, nil
}

// formTarget is the CSP source of a redirect URI: its origin, or its
// scheme for a native app's own scheme.
func formTarget(redirect string) string {
	u, err := url.Parse(redirect)
	if err != nil {
		return ""
	}
	if u.Scheme == "http" || u.Scheme == "https" {
		return u.Scheme + "://" + u.Host
	}
	return strings.ToLower(u.Scheme) + ":"
}
