package mcp

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// HTTPOptions configure the streamable HTTP transport.
type HTTPOptions struct {
	// Tokens authenticates bearer tokens; nil serves everyone as LocalUser
	// (--auth none, loopback only).
	Tokens *TokenStore
	// LocalUser is the user of every request when Tokens is nil.
	LocalUser string
	// AllowedOrigins lists extra browser origins (scheme://host:port)
	// allowed besides the server's own host and loopback.
	AllowedOrigins []string
	// Console, when set, is served at / and may authenticate /mcp
	// requests itself (the web console's session cookie).
	Console Console
}

// Console is the web console as the HTTP transport mounts it (package web).
type Console interface {
	http.Handler // its pages and login, at every path but /mcp and /healthz
	// MCP wraps the MCP endpoint: bearer authenticates bearer tokens;
	// open is the endpoint behind that check, for requests the console
	// authenticated (with the user in the context).
	MCP(bearer, open http.Handler) http.Handler
}

// HTTPHandler returns the HTTP handler: MCP at /mcp, liveness at /healthz.
func (s *Server) HTTPHandler(opts HTTPOptions) http.Handler {
	// An event store and no standalone GET stream: with mcp-go v1.2.1 this
	// keeps progress notifications on the POST's own SSE stream, in order,
	// before the response; the GET stream would otherwise compete for them.
	streamable := server.NewStreamableHTTPServer(s.mcp,
		server.WithEndpointPath("/mcp"),
		server.WithEventStore(server.NewInMemoryEventStore()),
		server.WithDisableStreaming(true),
		server.WithSessionIdleTTL(30*time.Minute),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			return WithUser(ctx, UserFrom(r.Context()))
		}),
	)
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	endpoint := limitBody(streamable)
	authed := s.authenticate(opts, endpoint)
	if opts.Console != nil {
		authed = opts.Console.MCP(authed, endpoint)
		mux.Handle("/", opts.Console)
	}
	mux.Handle("/mcp", checkOrigin(opts.AllowedOrigins, authed))
	return mux
}

// maxRequestBytes bounds one request body: write_file's 10 MiB of content
// with JSON escaping fits; a client cannot make the server buffer more.
const maxRequestBytes = 32 << 20

// limitBody refuses bodies over maxRequestBytes: at once with 413 when the
// length is declared, by cutting the read otherwise.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxRequestBytes {
			http.Error(w, fmt.Sprintf("request body of %d bytes is over the limit of %d: send large files in parts (write_file with append)",
				r.ContentLength, maxRequestBytes), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
		next.ServeHTTP(w, r)
	})
}

// authenticate maps the bearer token to a user, or answers 401.
func (s *Server) authenticate(opts HTTPOptions, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if opts.Tokens == nil {
			next.ServeHTTP(w, r.WithContext(WithUser(r.Context(), opts.LocalUser)))
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		user, err := "", error(nil)
		if ok {
			user, err = opts.Tokens.Authenticate(r.Context(), strings.TrimSpace(tok))
		}
		if !ok || err != nil {
			if err != nil && err != ErrBadToken {
				s.deps.log.Error().Err(err).Msg("authenticate")
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="warren"`)
			http.Error(w, "missing or invalid bearer token: send 'Authorization: Bearer <token>' (create one with 'warren token create --user NAME')", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithUser(r.Context(), user)))
	})
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
