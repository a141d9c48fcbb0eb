package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/warrenhq/warren/mcp/oauth"
	"github.com/warrenhq/warren/mcp/tokens"
)

// HTTPOptions configure the streamable HTTP transport.
type HTTPOptions struct {
	// Tokens authenticates bearer tokens; nil serves everyone as LocalUser
	// (--auth none, loopback only).
	Tokens *tokens.Store
	// LocalUser is the user of every request when Tokens is nil.
	LocalUser string
	// AllowedOrigins lists extra browser origins (scheme://host:port)
	// allowed besides the server's own host and loopback.
	AllowedOrigins []string
	// BodyTimeout bounds how long a request body may take to arrive;
	// zero means DefaultBodyTimeout. Responses (long SSE streams) are not
	// bounded by it.
	BodyTimeout time.Duration
	// Metrics, when set, is served at /metrics behind the same Origin
	// check and authentication as /mcp.
	Metrics http.Handler
	// Ready, when set, is served at /readyz without authentication, like
	// /healthz: it says only whether the server can work, and why not.
	Ready http.Handler
	// Console, when set, is served at / and may authenticate /mcp
	// requests itself (the web console's session cookie).
	Console Console
	// Conns, when set, charges each authenticated /mcp request's
	// connection to its user (ConnLimiter.PerUser).
	Conns *ConnLimiter
	// OAuth, when set (with Tokens), is warren's authorization server:
	// its endpoints are served, its access tokens accepted besides the
	// personal access tokens of Tokens, and a 401 names its metadata.
	OAuth *oauth.Server
	// SharedSessions, when set, keeps the MCP session ids of the 2025
	// revisions where other replicas find them (PostgreSQL): a client's
	// session continues whichever replica its next request reaches.
	SharedSessions SharedSessions
}

// Console is the web console as the HTTP transport mounts it (package web).
type Console interface {
	http.Handler // its pages and login, at every path but /mcp and /healthz
	// MCP wraps the MCP endpoint: bearer authenticates bearer tokens;
	// open is the endpoint behind that check, for requests the console
	// authenticated (with the user in the context).
	MCP(bearer, open http.Handler) http.Handler
}

// DefaultBodyTimeout is how long a request body may take to arrive: the
// largest one (32 MiB) needs about 1 MB/s.
const DefaultBodyTimeout = 30 * time.Second

// HTTPHandler returns the HTTP handler: MCP at /mcp, liveness at /healthz.
func (s *Server) HTTPHandler(opts HTTPOptions) http.Handler {
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	s.events = newEventStore(eventsPerSession, eventsTotal, eventsMaxAge)
	s.owners = newSessionOwners(opts.SharedSessions)
	s.deps.shared.p.Store(s.owners)
	// An event store and no standalone GET stream: with mcp-go v1.2.1 this
	// keeps progress notifications on the POST's own SSE stream, in order,
	// before the response; the GET stream would otherwise compete for them.
	// The store is warren's own, bounded (event_store.go).
	streamable := server.NewStreamableHTTPServer(s.mcp,
		server.WithEndpointPath("/mcp"),
		server.WithEventStore(s.events),
		server.WithDisableStreaming(true),
		server.WithSessionIdleTTL(30*time.Minute),
		server.WithSessionIdManagerResolver(s.owners),
		server.WithStreamableHTTPLogger(slog.New(slogToZerolog{l: s.deps.log})),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			ctx = WithUser(ctx, UserFrom(r.Context()))
			if FromConsole(r.Context()) {
				ctx = WithConsole(ctx)
			}
			return ctx
		}),
	)
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	if opts.Ready != nil {
		mux.Handle("/readyz", opts.Ready)
	}
	if opts.Metrics != nil {
		mux.Handle("/metrics", checkOrigin(opts.AllowedOrigins, s.authenticate(opts, opts.Metrics)))
	}
	if opts.OAuth != nil && opts.Tokens != nil {
		// Not behind checkOrigin: the authorization server checks the
		// origin of its one browser form itself, and its other endpoints
		// carry no cookie.
		for _, p := range opts.OAuth.Paths() {
			mux.Handle(p, opts.OAuth)
		}
	} else {
		for _, p := range []string{"/register", "/authorize", "/token"} {
			mux.HandleFunc(p, noOAuth)
		}
	}
	endpoint := s.owners.requireOwnSession(readBody(opts.BodyTimeout, s.modernCompat(gzipJSON(streamable))))
	if opts.Conns != nil {
		endpoint = opts.Conns.PerUser(endpoint)
	}
	authed := s.authenticate(opts, endpoint)
	if opts.Console != nil {
		if opts.Tokens == nil {
			authed = consolePage(authed)
		}
		authed = opts.Console.MCP(authed, viaConsole(endpoint))
		mux.Handle("/", opts.Console)
	}
	mux.Handle("/mcp", checkOrigin(opts.AllowedOrigins, bodyDeadline(opts.BodyTimeout, authed)))
	return mux
}

// maxRequestBytes bounds one request body: write_file's 10 MiB of content
// with JSON escaping fits; a client cannot make the server buffer more.
const maxRequestBytes = 32 << 20

// bodyDeadline gives a request's body timeout to arrive, from the start:
// a request refused before its body is read (no token) would otherwise
// hold its connection while net/http waits for the body to discard it,
// and a few hundred such connections exhausted the server's descriptors.
// Requests without a body are left alone: their connection is already
// waiting for the client to go away, and a deadline would cut the response.
func bodyDeadline(timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
		}
		next.ServeHTTP(w, r)
	})
}

// readBody reads the whole body within the deadline bodyDeadline set, then
// lifts the deadline so that the response, an SSE stream as long as the
// command, is not cut. Bodies over maxRequestBytes are refused (413) at once
// when declared, when reached otherwise.
func readBody(timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		tooBig := fmt.Sprintf("request body over the limit of %d bytes: send large files in parts (write_file with append)", maxRequestBytes)
		if r.ContentLength > maxRequestBytes {
			http.Error(w, tooBig, http.StatusRequestEntityTooLarge)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
		var maxErr *http.MaxBytesError
		switch {
		case errors.As(err, &maxErr):
			http.Error(w, tooBig, http.StatusRequestEntityTooLarge)
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			http.Error(w, fmt.Sprintf("request body did not arrive within %s", timeout), http.StatusRequestTimeout)
			return
		case err != nil:
			http.Error(w, "read request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// tokenHelp is what a client without a valid token is told.
const tokenHelp = "send the header 'Authorization: Bearer <token>'; create a token on the server with 'warren token create --user NAME'"

// oauthHelp is what a client without a valid token is told when warren is
// an OAuth authorization server too.
const oauthHelp = "sign in through your MCP client's OAuth support (it finds warren's authorization server from this answer), or " + tokenHelp

// authenticate maps the bearer token to a user, or answers 401.
//
// With OAuth (--public-url), the 401 names the protected-resource metadata
// (RFC 9728), from which MCP clients find warren's authorization server;
// an access token of that server (wat_…) is checked by it, for this
// resource, and any other token is a personal access token.
//
// Without OAuth, the 401 carries `WWW-Authenticate: Bearer realm="warren"`
// (with error="invalid_token" when a token was sent) and no
// resource_metadata. OAuth-capable clients (the TypeScript SDK with an auth
// provider) still probe for one on any 401; what they fall back to,
// /register, answers with an OAuth error that carries the message below
// (noOAuth), so that the client shows it instead of a login.
func (s *Server) authenticate(opts HTTPOptions, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if opts.Tokens == nil {
			next.ServeHTTP(w, r.WithContext(WithUser(r.Context(), opts.LocalUser)))
			return
		}
		tok, ok := bearerToken(r.Header.Get("Authorization"))
		user, err := "", error(nil)
		switch {
		case ok && opts.OAuth != nil && oauth.IsAccessToken(tok):
			user, err = opts.OAuth.Authenticate(r.Context(), tok)
		case ok:
			user, err = opts.Tokens.Authenticate(r.Context(), tok)
		}
		if !ok || err != nil {
			if err != nil && !errors.Is(err, tokens.ErrBadToken) && !errors.Is(err, oauth.ErrBadToken) {
				s.deps.log.Error().Err(err).Msg("authenticate")
			}
			challenge, help := `Bearer realm="warren"`, tokenHelp
			if opts.OAuth != nil {
				// RFC 9728: the client finds the authorization server here.
				challenge += `, resource_metadata="` + opts.OAuth.ResourceMetadataURL() + `", scope="` + oauth.Scope + `"`
				help = oauthHelp
			}
			msg := "missing bearer token: " + help
			if ok {
				challenge += `, error="invalid_token", error_description="invalid, expired or revoked token"`
				msg = "invalid, expired or revoked bearer token: " + help
			}
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, msg, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithUser(r.Context(), user)))
	})
}

// bearerToken returns the token of an Authorization header. The scheme is
// case-insensitive (RFC 7235).
func bearerToken(header string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(header), " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", false
	}
	return tok, true
}

// noOAuth answers the OAuth endpoints that OAuth-capable MCP clients fall
// back to when a 401 names no authorization server (/register, then
// /authorize or /token): with an OAuth error whose description says how to
// authenticate to warren, which such clients show to their user.
func noOAuth(w http.ResponseWriter, r *http.Request) {
	msg := "warren does not offer OAuth: configure your MCP client to " + tokenHelp
	if r.Method == http.MethodGet { // /authorize, in a browser
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	code := "invalid_client_metadata" // registration (RFC 7591)
	if r.URL.Path == "/token" {
		code = "unsupported_grant_type"
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": msg})
}

// checkOrigin refuses browser requests from foreign origins (403), so that
// a web page cannot drive the server through the user's browser, also via
// DNS rebinding. Requests without Origin (non-browser clients) pass.
func checkOrigin(extra []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" && !originAllowed(origin, r.Host, extra) {
			http.Error(w, "forbidden origin "+origin+": start the server with --allow-origin "+origin+" to allow it", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func originAllowed(origin, host string, extra []string) bool {
	if slices.Contains(extra, origin) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, host) && IsLoopbackHost(hostOnly(host)) {
		return true
	}
	return IsLoopbackHost(u.Hostname())
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// IsLoopbackHost reports whether host (no port) names the loopback
// interface.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
