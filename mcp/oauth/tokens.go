package oauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Prefixes of warren's OAuth secrets, so that a leaked one is recognisable
// (and told apart from a personal access token, wrn_).
const (
	accessPrefix  = "wat_"
	refreshPrefix = "wrt_"
	codePrefix    = "wac_"
)

// IsAccessToken reports whether tok has the form of one of this server's
// access tokens (cheap; Authenticate checks it).
func IsAccessToken(tok string) bool { return strings.HasPrefix(tok, accessPrefix) }

// ErrBadToken is returned for an access token that is unknown, expired,
// revoked or issued for another resource.
var ErrBadToken = errors.New("invalid, expired or revoked access token")

// Authenticate returns the user of an access token issued for this
// server's resource (its audience), or ErrBadToken.
func (s *Server) Authenticate(ctx context.Context, tok string) (string, error) {
	if !IsAccessToken(tok) || len(tok) > 100 {
		return "", ErrBadToken
	}
	h := hashOf(tok)
	now := s.opts.Now()
	s.mu.Lock()
	c, ok := s.cache[h]
	s.mu.Unlock()
	if ok && now.Sub(c.checked) < cacheTTL && now.Before(c.expires) {
		return c.user, nil
	}
	var user, resource string
	var expires int64
	err := s.db.QueryRowContext(ctx, `SELECT "user", resource, expires_at FROM oauth_tokens WHERE hash = ? AND kind = 'access' AND revoked_at IS NULL`, h).
		Scan(&user, &resource, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrBadToken
	}
	if err != nil {
		return "", fmt.Errorf("check access token: %w", err)
	}
	exp := time.UnixMilli(expires)
	// The audience: a token issued for another resource (another warren,
	// or this one under another public URL) opens nothing here.
	if resource != s.resource || !now.Before(exp) || !s.stillAllowed(user) {
		return "", ErrBadToken
	}
	s.mu.Lock()
	if len(s.cache) > 10000 {
		clear(s.cache)
	}
	s.cache[h] = cachedAccess{user: user, expires: exp, checked: now}
	s.mu.Unlock()
	return user, nil
}

// stillAllowed reports whether user may still use the server: with an
// upstream provider, the allow list may have shrunk since the grant.
func (s *Server) stillAllowed(user string) bool {
	return s.upstream == nil || s.upstream.allowed(user)
}

// postingClient is the prelude of the endpoints a client POSTs a form
// to (token, revocation): the method, the bounded form and the client's
// authentication. On failure it has answered, and reports false.
func (s *Server) postingClient(w http.ResponseWriter, r *http.Request) (*Client, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		oauthError(w, http.StatusMethodNotAllowed, "invalid_request", "use POST")
		return nil, false
	}
	if err := parseForm(w, r); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return nil, false
	}
	c, err := s.authClient(r)
	if err != nil {
		s.clientError(w, err)
		return nil, false
	}
	return c, true
}

// token is the token endpoint.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	c, ok := s.postingClient(w, r)
	if !ok {
		return
	}
	switch gt := r.PostForm.Get("grant_type"); gt {
	case "authorization_code":
		s.redeemCode(w, r, c)
	case "refresh_token":
		s.refresh(w, r, c)
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
	}
}

func parseForm(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		return errors.New("send the parameters as application/x-www-form-urlencoded")
	}
	if err := r.ParseForm(); err != nil {
		return fmt.Errorf("read the form (at most %d bytes): %v", maxBody, err)
	}
	return nil
}

// checkResource checks an RFC 8707 resource parameter: absent, or this
// server's MCP endpoint.
func (s *Server) checkResource(got string) error {
	if got == "" || strings.TrimSuffix(got, "/") == s.resource {
		return nil
	}
	return &errInvalid{"invalid_target", fmt.Sprintf("resource must be %s, the MCP endpoint this server protects", s.resource)}
}

func (s *Server) redeemCode(w http.ResponseWriter, r *http.Request, c *Client) {
	code := r.PostForm.Get("code")
	var family, clientID, user, redirect, challenge, resource, scope string
	var expires int64
	var used sql.NullInt64
	err := s.db.QueryRowContext(r.Context(), `SELECT family, client_id, "user", redirect_uri, challenge, resource, scope, expires_at, used_at
		FROM oauth_codes WHERE hash = ?`, hashOf(code)).Scan(&family, &clientID, &user, &redirect, &challenge, &resource, &scope, &expires, &used)
	if errors.Is(err, sql.ErrNoRows) {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown authorization code")
		return
	}
	if err != nil {
		s.clientError(w, err)
		return
	}
	now := s.opts.Now()
	// The code is marked used and its tokens stored in one transaction: of
	// two concurrent redemptions exactly one marks it, and the other, which
	// waits for that transaction, then finds the tokens to revoke.
	tx, first, err := s.useOnce(r.Context(), "oauth_codes", hashOf(code), family, now)
	if err != nil {
		s.clientError(w, err)
		return
	}
	if !first {
		// A second use: the code leaked. What the first use issued is
		// revoked (OAuth 2.1 §4.1.3).
		s.opts.Log.Warn().Str("client_id", clientID).Str("user", user).Msg("oauth: an authorization code was used twice; what it issued is revoked")
		oauthError(w, http.StatusBadRequest, "invalid_grant", "this authorization code was already used: the tokens it issued are revoked")
		return
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	var refuse string
	switch {
	case clientID != c.ID:
		refuse = "the authorization code was issued to another client"
	case now.UnixMilli() >= expires:
		refuse = "the authorization code has expired: authorize again"
	case r.PostForm.Get("redirect_uri") != "" && r.PostForm.Get("redirect_uri") != redirect:
		refuse = "redirect_uri differs from the authorization request's"
	case !verifierMatches(r.PostForm.Get("code_verifier"), challenge):
		refuse = "code_verifier does not match the code_challenge (PKCE S256)"
	}
	if refuse != "" || s.checkResource(r.PostForm.Get("resource")) != nil {
		// A code is worth one attempt: a wrong one uses it up.
		if err := tx.Commit(); err != nil {
			s.clientError(w, err)
			return
		}
		if refuse == "" {
			s.clientError(w, s.checkResource(r.PostForm.Get("resource")))
			return
		}
		oauthError(w, http.StatusBadRequest, "invalid_grant", refuse)
		return
	}
	s.issue(w, r.Context(), tx, family, c.ID, user, resource, scope)
}

// verifierMatches checks PKCE S256 (RFC 7636): BASE64URL(SHA256(verifier))
// equals the challenge; a verifier is 43 to 128 characters.
func verifierMatches(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	got := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(got), []byte(challenge)) == 1
}

func (s *Server) refresh(w http.ResponseWriter, r *http.Request, c *Client) {
	tok := r.PostForm.Get("refresh_token")
	h := hashOf(tok)
	var family, clientID, user, resource, scope string
	var expires int64
	var used, revoked sql.NullInt64
	err := s.db.QueryRowContext(r.Context(), `SELECT family, client_id, "user", resource, scope, expires_at, used_at, revoked_at
		FROM oauth_tokens WHERE hash = ? AND kind = 'refresh'`, h).Scan(&family, &clientID, &user, &resource, &scope, &expires, &used, &revoked)
	if errors.Is(err, sql.ErrNoRows) || !strings.HasPrefix(tok, refreshPrefix) {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown refresh token")
		return
	}
	if err != nil {
		s.clientError(w, err)
		return
	}
	if clientID != c.ID {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token was issued to another client")
		return
	}
	if revoked.Valid {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token was revoked: authorize again")
		return
	}
	if resource != s.resource {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token was issued for another resource")
		return
	}
	if !s.stillAllowed(user) {
		if err := s.revokeFamily(r.Context(), family); err != nil {
			s.clientError(w, err)
			return
		}
		s.opts.Log.Info().Str("user", user).Msg("oauth: refresh refused: the user is no longer on the allow list; the authorization is revoked")
		oauthError(w, http.StatusBadRequest, "invalid_grant", "this user may no longer use this warren")
		return
	}
	now := s.opts.Now()
	if err := s.checkResource(r.PostForm.Get("resource")); err != nil {
		s.clientError(w, err)
		return
	}
	// Used and replaced in one transaction (see redeemCode).
	tx, first, err := s.useOnce(r.Context(), "oauth_tokens", h, family, now)
	if err != nil {
		s.clientError(w, err)
		return
	}
	if !first {
		// Reuse of a rotated refresh token: someone holds a copy. The
		// family is revoked, so that neither copy works.
		s.opts.Log.Warn().Str("client_id", clientID).Str("user", user).Msg("oauth: a used refresh token was presented again; its family is revoked")
		oauthError(w, http.StatusBadRequest, "invalid_grant", "this refresh token was already used: every token of this authorization is revoked, authorize again")
		return
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if now.UnixMilli() >= expires {
		_ = tx.Commit()
		oauthError(w, http.StatusBadRequest, "invalid_grant", "the refresh token has expired: authorize again")
		return
	}
	s.issue(w, r.Context(), tx, family, c.ID, user, resource, scope)
}

// issue stores, in tx, a new access token and refresh token, commits tx
// and answers them.
func (s *Server) issue(w http.ResponseWriter, ctx context.Context, tx *sql.Tx, family, clientID, user, resource, scope string) {
	access, refresh := secret(accessPrefix), secret(refreshPrefix)
	now := s.opts.Now()
	for _, t := range []struct {
		tok, kind string
		ttl       time.Duration
	}{{access, "access", s.opts.AccessTTL}, {refresh, "refresh", s.opts.RefreshTTL}} {
		if _, err := tx.ExecContext(ctx, `INSERT INTO oauth_tokens (hash, kind, family, client_id, "user", resource, scope, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, hashOf(t.tok), t.kind, family, clientID, user, resource, scope,
			now.UnixMilli(), now.Add(t.ttl).UnixMilli()); err != nil {
			s.clientError(w, fmt.Errorf("store token: %w", err))
			return
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE oauth_clients SET last_used_at = ? WHERE id = ?`, now.UnixMilli(), clientID); err != nil {
		s.clientError(w, fmt.Errorf("store token: %w", err))
		return
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM oauth_tokens WHERE expires_at < ?`, now.Add(-24*time.Hour).UnixMilli()); err != nil {
		s.clientError(w, fmt.Errorf("store token: %w", err))
		return
	}
	if err := tx.Commit(); err != nil {
		s.clientError(w, fmt.Errorf("store token: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": access, "token_type": "Bearer", "expires_in": int(s.opts.AccessTTL.Seconds()),
		"refresh_token": refresh, "scope": scope,
	})
}

// revokeFamily revokes every token issued from one authorization.
func (s *Server) revokeFamily(ctx context.Context, family string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE oauth_tokens SET revoked_at = ? WHERE family = ? AND revoked_at IS NULL`,
		s.opts.Now().UnixMilli(), family); err != nil {
		return fmt.Errorf("revoke tokens: %w", err)
	}
	s.mu.Lock()
	clear(s.cache)
	s.mu.Unlock()
	return nil
}

// revoke is token revocation (RFC 7009): a refresh token revokes its
// whole authorization, an access token itself. Unknown tokens, and tokens
// of other clients, are answered 200 and left alone, as the RFC says.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	c, ok := s.postingClient(w, r)
	if !ok {
		return
	}
	tok := r.PostForm.Get("token")
	var kind, family, clientID string
	err := s.db.QueryRowContext(r.Context(), `SELECT kind, family, client_id FROM oauth_tokens WHERE hash = ?`, hashOf(tok)).Scan(&kind, &family, &clientID)
	switch {
	case errors.Is(err, sql.ErrNoRows) || (err == nil && clientID != c.ID):
	case err != nil:
		s.clientError(w, err)
		return
	case kind == "refresh":
		err = s.revokeFamily(r.Context(), family)
	default:
		_, err = s.db.ExecContext(r.Context(), `UPDATE oauth_tokens SET revoked_at = ? WHERE hash = ? AND revoked_at IS NULL`, s.opts.Now().UnixMilli(), hashOf(tok))
		s.mu.Lock()
		delete(s.cache, hashOf(tok))
		s.mu.Unlock()
	}
	if err != nil {
		s.clientError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// useOnce marks the single-use credential hash of table (oauth_codes or
// oauth_tokens) used, in a transaction the caller goes on with and
// commits: of two concurrent uses exactly one marks it. A credential used
// before is a leaked copy: first is false, nothing stays open, and every
// token of its family is revoked.
func (s *Server) useOnce(ctx context.Context, table, hash, family string, now time.Time) (tx *sql.Tx, first bool, err error) {
	tx, err = s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	res, err := tx.ExecContext(ctx, `UPDATE `+table+` SET used_at = ? WHERE hash = ? AND used_at IS NULL`, now.UnixMilli(), hash)
	if err != nil {
		tx.Rollback() //nolint:errcheck // the error above is the one to report
		return nil, false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		tx.Rollback() //nolint:errcheck // nothing was changed
		return nil, false, s.revokeFamily(ctx, family)
	}
	return tx, true, nil
}
