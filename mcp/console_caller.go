package mcp

import (
	"context"
	"net/http"
	"strings"
)

type consoleKey struct{}

// WithConsole returns ctx marked as a request of warren's own web console:
// one the console's sign-in authenticated (its cookie), never one whose
// client merely calls itself the console. The activity log keeps the mark,
// so that the console can set its own calls apart from the agents'.
func WithConsole(ctx context.Context) context.Context {
	return context.WithValue(ctx, consoleKey{}, true)
}

// FromConsole reports whether ctx is a request of the web console.
func FromConsole(ctx context.Context) bool {
	v, _ := ctx.Value(consoleKey{}).(bool)
	return v
}

// viaConsole marks every request as the console's: it wraps the handler
// that the console's own authentication (Console.MCP) hands its requests to.
func viaConsole(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(WithConsole(r.Context())))
	})
}

// consolePage marks, on a server without authentication (--auth none,
// loopback only), the requests that come from the console's page: its
// Origin is this server's own. There is no sign-in to tell them by, and
// any local process may act there anyway; the mark only sets the calls
// apart in the feed, and the feed shows them on request.
func consolePage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme := "http://"
		if r.TLS != nil {
			scheme = "https://"
		}
		if o := r.Header.Get("Origin"); o != "" && strings.EqualFold(o, scheme+r.Host) {
			r = r.WithContext(WithConsole(r.Context()))
		}
		next.ServeHTTP(w, r)
	})
}
