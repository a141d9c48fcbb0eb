package oauth

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/warrenhq/warren/sessions/bound"
)

// Client is a client warren knows: registered dynamically or described
// by its metadata document.
type Client struct {
	ID           string   `json:"client_id"`
	Name         string   `json:"client_name,omitempty"`
	URI          string   `json:"client_uri,omitempty"`
	RedirectURIs []string `json:"redirect_uris"`
	AuthMethod   string   `json:"token_endpoint_auth_method"`
	// Kind is "dcr" (registered at /register: its name is its own claim)
	// or "cimd" (its id is the HTTPS URL of its metadata document).
	Kind       string `json:"-"`
	secretHash string
}

// Limits on what a client sends.
const (
	maxRedirectURIs = 10
	maxURI          = 2000
	maxBody         = 16 << 10
)

// DefaultMaxClients bounds dynamically registered clients and cached
// metadata documents together (neither needs a sign-in); unused clients
// older than a day, and expired documents, make room.
const DefaultMaxClients = 10000

var authMethods = []string{"none", "client_secret_basic", "client_secret_post"}

// errInvalid is a client error whose text says what to fix.
type errInvalid struct{ code, msg string }

func (e *errInvalid) Error() string { return e.msg }

func invalidMeta(format string, args ...any) error {
	return &errInvalid{code: "invalid_client_metadata", msg: fmt.Sprintf(format, args...)}
}

// checkRedirectURI applies the redirect URI rules: an http URI on a
// loopback host (any port: native apps listen where they can), an https
// URI, or a native app's private-use scheme (RFC 8252 §7.1, e.g.
// cursor://…); never a fragment, never a scheme a browser would run.
func checkRedirectURI(raw string) error {
	if len(raw) > maxURI {
		return invalidMeta("redirect URI longer than %d bytes", maxURI)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return &errInvalid{"invalid_redirect_uri", fmt.Sprintf("redirect URI %q is not an absolute URI", bound.String(raw, bound.Reason))}
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return &errInvalid{"invalid_redirect_uri", fmt.Sprintf("redirect URI %q has a fragment, which OAuth forbids", bound.String(raw, bound.Reason))}
	}
	switch scheme := strings.ToLower(u.Scheme); {
	case scheme == "https" && u.Host != "" && u.User == nil:
		return nil
	case scheme == "http" && isLoopbackName(u.Hostname()) && u.User == nil:
		return nil
	case scheme == "http":
		return &errInvalid{"invalid_redirect_uri", fmt.Sprintf("redirect URI %q: http is allowed only on a loopback host (127.0.0.1, [::1], localhost); use https", bound.String(raw, bound.Reason))}
	case slices.Contains(forbiddenSchemes, scheme):
		return &errInvalid{"invalid_redirect_uri", fmt.Sprintf("redirect URI %q: scheme %s is not allowed", bound.String(raw, bound.Reason), scheme)}
	default:
		return nil // a native app's own scheme
	}
}

var forbiddenSchemes = []string{"javascript", "data", "vbscript", "file", "about", "blob", "filesystem", "ftp", "ws", "wss", "mailto"}

// redirectMatches reports whether the redirect_uri of a request is one the
// client registered: the same string, except that a loopback http URI
// matches on any port (RFC 8252 §7.3).
func (c *Client) redirectMatches(got string) bool {
	if slices.Contains(c.RedirectURIs, got) {
		return true
	}
	g, err := url.Parse(got)
	if err != nil || g.Scheme != "http" || !isLoopbackName(g.Hostname()) || g.Fragment != "" {
		return false
	}
	for _, reg := range c.RedirectURIs {
		r, err := url.Parse(reg)
		if err == nil && r.Scheme == "http" && strings.EqualFold(r.Hostname(), g.Hostname()) &&
			r.EscapedPath() == g.EscapedPath() && r.RawQuery == g.RawQuery {
			return true
		}
	}
	return false
}

// checkMetadata checks and bounds a client's metadata (from /register or
// a metadata document) and fills defaults.
func checkMetadata(c *Client, grantTypes, responseTypes []string) error {
	if len(c.RedirectURIs) == 0 {
		return &errInvalid{"invalid_redirect_uri", "redirect_uris is required: list the URIs warren may send the person back to"}
	}
	if len(c.RedirectURIs) > maxRedirectURIs {
		return &errInvalid{"invalid_redirect_uri", fmt.Sprintf("at most %d redirect_uris", maxRedirectURIs)}
	}
	for _, u := range c.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return err
		}
	}
	for _, g := range grantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return invalidMeta("grant type %q is not supported: warren offers authorization_code and refresh_token", bound.String(g, bound.Name))
		}
	}
	for _, t := range responseTypes {
		if t != "code" {
			return invalidMeta("response type %q is not supported: warren offers code", bound.String(t, bound.Name))
		}
	}
	c.Name = strings.TrimSpace(bound.String(printable(c.Name), bound.Name))
	if len(c.URI) > maxURI {
		c.URI = ""
	}
	if c.URI != "" {
		if u, err := url.Parse(c.URI); err != nil || u.Scheme != "https" {
			c.URI = "" // shown on the consent page only when it is a plain https link
		}
	}
	return nil
}

type registration struct {
	Client
	GrantTypes    []string `json:"grant_types"`
	ResponseTypes []string `json:"response_types"`
	Scope         string   `json:"scope"`
}

// register is dynamic client registration (RFC 7591).
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		oauthError(w, http.StatusMethodNotAllowed, "invalid_request", "register with POST and a JSON body")
		return
	}
	var reg registration
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	if err := dec.Decode(&reg); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", fmt.Sprintf("send the client's metadata as JSON of at most %d bytes", maxBody))
		return
	}
	c := reg.Client
	if c.AuthMethod == "" {
		c.AuthMethod = "client_secret_basic" // RFC 7591 §2
	}
	if !slices.Contains(authMethods, c.AuthMethod) {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", fmt.Sprintf("token_endpoint_auth_method %q is not supported: use one of %s",
			bound.String(c.AuthMethod, bound.Name), strings.Join(authMethods, ", ")))
		return
	}
	if err := checkMetadata(&c, reg.GrantTypes, reg.ResponseTypes); err != nil {
		s.clientError(w, err)
		return
	}
	if err := s.makeRoom(r.Context()); err != nil {
		s.opts.Log.Warn().Err(err).Msg("oauth: registration refused")
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", err.Error())
		return
	}
	c.Kind = "dcr"
	c.ID = secret("wrc_")[:26]
	var clientSecret string
	if c.AuthMethod != "none" {
		clientSecret = secret("wcs_")
		c.secretHash = hashOf(clientSecret)
	}
	meta, _ := json.Marshal(c)
	now := s.opts.Now()
	if _, err := s.db.ExecContext(r.Context(), `INSERT INTO oauth_clients (id, kind, metadata, secret_hash, created_at) VALUES (?, 'dcr', ?, ?, ?)`,
		c.ID, string(meta), nullable(c.secretHash), now.UnixMilli()); err != nil {
		s.opts.Log.Error().Err(err).Msg("oauth: store client")
		oauthError(w, http.StatusInternalServerError, "server_error", "could not store the registration")
		return
	}
	s.opts.Log.Info().Str("client_id", c.ID).Str("client_name", c.Name).Msg("oauth: client registered")
	out := map[string]any{
		"client_id": c.ID, "client_id_issued_at": now.Unix(), "client_name": c.Name,
		"redirect_uris": c.RedirectURIs, "token_endpoint_auth_method": c.AuthMethod,
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"}, "scope": Scope,
	}
	if c.URI != "" {
		out["client_uri"] = c.URI
	}
	if clientSecret != "" {
		out["client_secret"] = clientSecret
		out["client_secret_expires_at"] = 0
	}
	writeJSON(w, http.StatusCreated, out)
}

// makeRoom keeps registered clients under maxClients, deleting unused
// ones older than a day when the limit is reached.
func (s *Server) makeRoom(ctx context.Context) error {
	full, err := s.clientsFull(ctx)
	if err != nil {
		return err
	}
	if full {
		return fmt.Errorf("warren keeps at most %d clients and has that many: try again tomorrow, or use a client that has a client ID metadata document", s.opts.MaxClients)
	}
	return nil
}

// clientsFull reports whether MaxClients clients are kept, after making
// room: expired metadata documents and registered clients unused after a
// day go first.
func (s *Server) clientsFull(ctx context.Context) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM oauth_clients`).Scan(&n); err != nil {
		return false, fmt.Errorf("count clients: %w", err)
	}
	if n < s.opts.MaxClients {
		return false, nil
	}
	now := s.opts.Now()
	if _, err := s.db.ExecContext(ctx, `DELETE FROM oauth_clients WHERE (kind = 'cimd' AND expires_at < ?)
		OR (kind = 'dcr' AND last_used_at IS NULL AND created_at < ?)`, now.UnixMilli(), now.Add(-24*time.Hour).UnixMilli()); err != nil {
		return false, fmt.Errorf("prune clients: %w", err)
	}
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM oauth_clients`).Scan(&n); err != nil {
		return false, fmt.Errorf("count clients: %w", err)
	}
	return n >= s.opts.MaxClients, nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// errUnknownClient: no such client.
var errUnknownClient = &errInvalid{"invalid_client", "unknown client_id: register the client first (it may have been removed), or use a client ID metadata document URL"}

// client returns the client with id: a registered one, or, when id is an
// https URL, the one its metadata document describes (fetched, checked
// and cached).
func (s *Server) client(ctx context.Context, id string) (*Client, error) {
	if id == "" {
		return nil, &errInvalid{"invalid_request", "client_id is missing"}
	}
	if len(id) > maxURI {
		return nil, errUnknownClient
	}
	var kind, meta string
	var secretHash sql.NullString
	var expires sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT kind, metadata, secret_hash, expires_at FROM oauth_clients WHERE id = ?`, id).
		Scan(&kind, &meta, &secretHash, &expires)
	isURL := strings.HasPrefix(id, "https://")
	switch {
	case errors.Is(err, sql.ErrNoRows) && isURL:
		return s.fetchClient(ctx, id)
	case errors.Is(err, sql.ErrNoRows):
		return nil, errUnknownClient
	case err != nil:
		return nil, fmt.Errorf("look up client: %w", err)
	}
	if kind == "cimd" && expires.Valid && s.opts.Now().UnixMilli() >= expires.Int64 {
		return s.fetchClient(ctx, id)
	}
	var c Client
	if err := json.Unmarshal([]byte(meta), &c); err != nil {
		return nil, fmt.Errorf("read client %s: %w", bound.String(id, bound.Name), err)
	}
	c.ID, c.Kind, c.secretHash = id, kind, secretHash.String
	return &c, nil
}

// authClient authenticates the client of a token or revocation request:
// a public client names itself with client_id; a confidential one sends
// its secret (HTTP Basic or client_secret in the body).
func (s *Server) authClient(r *http.Request) (*Client, error) {
	id, sec, basic := r.BasicAuth()
	if basic {
		if u, err := url.QueryUnescape(id); err == nil {
			id = u
		}
		if u, err := url.QueryUnescape(sec); err == nil {
			sec = u
		}
	} else {
		id, sec = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	c, err := s.client(r.Context(), id)
	var inv *errInvalid
	if errors.As(err, &inv) {
		return nil, &errInvalid{"invalid_client", inv.msg}
	}
	if err != nil {
		return nil, err
	}
	if c.secretHash != "" {
		if sec == "" || subtle.ConstantTimeCompare([]byte(hashOf(sec)), []byte(c.secretHash)) != 1 {
			return nil, &errInvalid{"invalid_client", "wrong or missing client secret"}
		}
	}
	return c, nil
}

// clientError answers an error of client input, or a server error.
func (s *Server) clientError(w http.ResponseWriter, err error) {
	var inv *errInvalid
	if errors.As(err, &inv) {
		status := http.StatusBadRequest
		if inv.code == "invalid_client" {
			status = http.StatusUnauthorized
		}
		oauthError(w, status, inv.code, inv.msg)
		return
	}
	s.opts.Log.Error().Err(err).Msg("oauth")
	oauthError(w, http.StatusInternalServerError, "server_error", "internal error; the server log has the details")
}

// printable drops control and format characters (terminal escapes,
// bidirectional overrides) from a name people and operators are shown.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, s)
}
