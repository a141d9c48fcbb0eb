package mcp

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestConsolePageMarksOnlyTheServersOwnOrigin: without authentication the
// console's calls are told by their Origin; a page on another port of the
// same host, or a client that sends none, is not the console.
func TestConsolePageMarksOnlyTheServersOwnOrigin(t *testing.T) {
	var marked bool
	h := consolePage(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { marked = FromConsole(r.Context()) }))
	for origin, want := range map[string]bool{
		"http://127.0.0.1:7373": true,
		"http://127.0.0.1:8080": false,
		"http://localhost:7373": false,
		"":                      false,
	} {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:7373/mcp", nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		if marked != want {
			t.Errorf("Origin %q: marked as the console's = %v, want %v", origin, marked, want)
		}
	}
}
