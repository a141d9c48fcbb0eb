// Package oauth is warren's OAuth 2.1 authorization server and the
// resource-server side of the MCP authorization spec, so that clients
// that add a remote MCP server by its URL (Claude's custom connectors,
// VS Code, Cursor) can connect to 'warren serve http' without a bridge.
//
// warren is its own authorization server: it publishes protected-resource
// metadata (RFC 9728) and authorization-server metadata (RFC 8414), issues
// authorization codes only with PKCE S256, short-lived access tokens bound
// to its MCP endpoint (RFC 8707), one-use refresh tokens whose reuse
// revokes their family, names itself in the redirect (RFC 9207), revokes
// (RFC 7009), and knows clients by dynamic registration (RFC 7591) or by
// the URL of their Client ID Metadata Document. People sign in at an
// upstream OpenID Connect provider, or, on a single-user server, with the
// web console's own sign-in.
//
// The core is written here: no maintained Go library serves both dynamic
// registration and client ID metadata documents; golang.org/x/oauth2 and
// github.com/coreos/go-oidc/v3 do the upstream login. State is in the
// database's "oauth" tables; every secret is kept only as its SHA-256.
package oauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenhq/warren/sessions/sqlschema"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Scope is the one scope warren grants: use of the MCP endpoint as the
// person who approved.
const Scope = "mcp"

// Lifetimes.
const (
	// DefaultAccessTTL is how long an access token works: short, so that
	// a leaked one is soon worthless; the client refreshes.
	DefaultAccessTTL = time.Hour
	// DefaultRefreshTTL bounds a refresh token that is never used.
	DefaultRefreshTTL = 30 * 24 * time.Hour
	codeTTL           = time.Minute
	requestTTL        = 10 * time.Minute
	loginTTL          = 12 * time.Hour
)

// Options configure the Server.
type Options struct {
	// PublicURL is warren's external origin (scheme://host[:port], no
	// path): the issuer, and the base of the resource PublicURL+"/mcp".
	PublicURL string
	// Upstream, when set, is where people sign in.
	Upstream *UpstreamConfig
	// Console, when Upstream is nil, is the login of a single-user server:
	// the web console's session in the same browser.
	Console ConsoleLogin
	// AccessTTL and RefreshTTL override the defaults when positive.
	AccessTTL, RefreshTTL time.Duration
	// Fetch configures fetching client ID metadata documents.
	Fetch FetchOptions
	// MaxClients bounds the clients kept: registered ones and cached
	// metadata documents (both can be made without signing in); 0 means
	// DefaultMaxClients.
	MaxClients int
	// Log receives what the operator should know; never a secret.
	Log zerolog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// ConsoleLogin is the web console's sign-in as the consent page uses it on
// a single-user server: the user of the request's console cookie, proved
// by the console key the consent page's script copies from the console's
// storage into the form.
type ConsoleLogin interface {
	ConsoleUser(r *http.Request, key string) (string, error)
}

// Server is the authorization server and the resource server's check.
type Server struct {
	opts     Options
	db       *sql.DB
	issuer   string
	resource string
	fetcher  *fetcher
	upstream *upstream

	// mu guards cache: a checked access token is trusted for cacheTTL
	// without the database; a revocation here clears it at once.
	mu    sync.Mutex
	cache map[string]cachedAccess
}

type cachedAccess struct {
	user    string
	expires time.Time
	checked time.Time
}

const cacheTTL = 5 * time.Second

// New applies the oauth tables' migrations and returns the server.
func New(ctx context.Context, db *sql.DB, opts Options) (*Server, error) {
	issuer, err := CheckPublicURL(opts.PublicURL)
	if err != nil {
		return nil, err
	}
	if opts.Upstream == nil && opts.Console == nil {
		return nil, errors.New("oauth: no login: configure an upstream OpenID Connect provider (--oidc-issuer), or run with the web console")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.AccessTTL <= 0 {
		opts.AccessTTL = DefaultAccessTTL
	}
	if opts.MaxClients <= 0 {
		opts.MaxClients = DefaultMaxClients
	}
	if opts.RefreshTTL <= 0 {
		opts.RefreshTTL = DefaultRefreshTTL
	}
	if err := sqlschema.Migrate(ctx, db, "oauth", migrations, "migrations"); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, db: db, issuer: issuer, resource: issuer + "/mcp", cache: map[string]cachedAccess{}}
	s.fetcher = newFetcher(opts.Fetch)
	if opts.Upstream != nil {
		if s.upstream, err = newUpstream(ctx, *opts.Upstream, issuer+CallbackPath); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// CheckPublicURL checks a --public-url and returns it without a trailing
// slash: https, or http on a loopback host (tests, a local proxy); no path,
// query or fragment.
func CheckPublicURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		return "", fmt.Errorf("--public-url %q: want warren's external origin, e.g. https://warren.example.com (no path)", raw)
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackName(u.Hostname())) {
		return "", fmt.Errorf("--public-url %q: OAuth needs https (put a reverse proxy with TLS in front of warren; see docs/remote-clients.md); http is allowed only on a loopback host", raw)
	}
	return u.Scheme + "://" + u.Host, nil
}

// Issuer is the authorization server's identifier (the public URL).
func (s *Server) Issuer() string { return s.issuer }

// Resource is the protected resource: the MCP endpoint's URL.
func (s *Server) Resource() string { return s.resource }

// ResourceMetadataURL is where the protected-resource metadata is served
// (RFC 9728, the path of the resource inserted after the well-known name).
func (s *Server) ResourceMetadataURL() string {
	return s.issuer + ResourceMetadataPath + "/mcp"
}

// Paths served by the Server.
const (
	ResourceMetadataPath = "/.well-known/oauth-protected-resource"
	ServerMetadataPath   = "/.well-known/oauth-authorization-server"
	OpenIDMetadataPath   = "/.well-known/openid-configuration"
	AuthorizePath        = "/authorize"
	TokenPath            = "/token"
	RegisterPath         = "/register"
	RevokePath           = "/revoke"
	ConsentPath          = "/oauth/consent"
	CallbackPath         = "/oauth/callback"
	assetsPath           = "/oauth/assets/"
)

// Paths lists the paths (and subtrees, ending in "/") to route to the
// Server.
func (s *Server) Paths() []string {
	return []string{ResourceMetadataPath, ResourceMetadataPath + "/", ServerMetadataPath, ServerMetadataPath + "/",
		OpenIDMetadataPath, AuthorizePath, TokenPath, RegisterPath, RevokePath, ConsentPath, CallbackPath, assetsPath}
}

// ServeHTTP serves the authorization server's endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if p == TokenPath || p == RegisterPath || p == RevokePath {
		// Browser-based clients call these across origins; they carry no
		// cookie, so any origin may.
		w.Header().Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Methods", "POST")
			w.Header().Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
			w.Header().Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	switch {
	case p == ResourceMetadataPath || p == ResourceMetadataPath+"/mcp":
		s.resourceMetadata(w, r)
	case p == ServerMetadataPath || p == OpenIDMetadataPath:
		s.serverMetadata(w, r)
	case p == AuthorizePath:
		s.authorize(w, r)
	case p == TokenPath:
		s.token(w, r)
	case p == RegisterPath:
		s.register(w, r)
	case p == RevokePath:
		s.revoke(w, r)
	case p == ConsentPath:
		s.consent(w, r)
	case p == CallbackPath:
		s.callback(w, r)
	case strings.HasPrefix(p, assetsPath):
		serveAsset(w, r, strings.TrimPrefix(p, assetsPath))
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) resourceMetadata(w http.ResponseWriter, r *http.Request) {
	if !getOnly(w, r) {
		return
	}
	w.Header().Set("Access-Control-Allow-Origin", "*") // public metadata, read by browser-based clients
	writeJSON(w, http.StatusOK, map[string]any{
		"resource":                 s.resource,
		"authorization_servers":    []string{s.issuer},
		"bearer_methods_supported": []string{"header"},
		"scopes_supported":         []string{Scope},
		"resource_name":            "warren",
	})
}

func (s *Server) serverMetadata(w http.ResponseWriter, r *http.Request) {
	if !getOnly(w, r) {
		return
	}
	w.Header().Set("Access-Control-Allow-Origin", "*")
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         s.issuer,
		"authorization_endpoint":                         s.issuer + AuthorizePath,
		"token_endpoint":                                 s.issuer + TokenPath,
		"registration_endpoint":                          s.issuer + RegisterPath,
		"revocation_endpoint":                            s.issuer + RevokePath,
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          authMethods,
		"revocation_endpoint_auth_methods_supported":     authMethods,
		"scopes_supported":                               []string{Scope},
		"authorization_response_iss_parameter_supported": true,
		"client_id_metadata_document_supported":          true,
	})
}

func getOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// oauthError answers an OAuth error (RFC 6749 §5.2) as JSON.
func oauthError(w http.ResponseWriter, status int, code, desc string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="warren"`)
	}
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

// secret returns 256 random bits, base64url; prefix names the kind.
func secret(prefix string) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never on Linux ≥ 3.17
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func isLoopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	return isLoopbackIP(strings.Trim(host, "[]"))
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only warren's own structs are marshalled
	}
	return string(b)
}
