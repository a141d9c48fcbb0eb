package mcp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestOversizedRequestsAreRefused: a client cannot make the server buffer
// an unbounded body, declared or streamed.
func TestOversizedRequestsAreRefused(t *testing.T) {
	srv, err := New(Options{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.HTTPHandler(HTTPOptions{LocalUser: "me"}))
	defer ts.Close()

	body := `{"jsonrpc":"2.0","id":1,"method":"ping","pad":"` + strings.Repeat("x", maxRequestBytes) + `"}`
	resp, err := http.Post(ts.URL+"/mcp", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(msg), "over the limit") {
		t.Fatalf("declared oversized body: %d %q", resp.StatusCode, msg)
	}

	// Without a declared length (chunked), the read is cut off instead.
	req, _ := http.NewRequest("POST", ts.URL+"/mcp", io.MultiReader(strings.NewReader(body)))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err = http.DefaultClient.Do(req)
	if err == nil {
		msg, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && !strings.Contains(string(msg), "error") {
			t.Fatalf("streamed oversized body was accepted: %d %.200q", resp.StatusCode, msg)
		}
	}
}
