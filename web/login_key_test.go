package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// signIn signs in from the console's own page with body and returns the
// cookie and the console key the answer carried.
func (s *site) signIn(body string) (cookie, key string) {
	s.t.Helper()
	status, resp, ck := s.post(LoginPath, s.url, "", "", body)
	if status/100 != 2 || ck == nil {
		s.t.Fatalf("sign-in with %s: %d %s", body, status, resp)
	}
	var answer struct {
		Key string `json:"key"`
	}
	_ = json.Unmarshal([]byte(resp), &answer)
	return ck.Value, answer.Key
}

// works reports whether the console session (cookie, key) can open an MCP
// session from the console's own origin.
func (s *site) works(cookie, key string) (bool, string) {
	s.t.Helper()
	status, body, _ := s.postKey("/mcp", s.url, cookie, key, "", initialize)
	return status == http.StatusOK && strings.Contains(body, `"serverInfo"`), body
}

// The attack of issue 21: browsers send a 127.0.0.1 cookie to every port of
// 127.0.0.1, so another local service receives the console's cookie and
// replays it from its own server with the console's Origin forged. The
// cookie alone must open nothing; nor may it be paired with the key of
// another sign-in, nor buy a key from any endpoint.
func TestCookieAloneIsWorthNothing(t *testing.T) {
	s := newSite(t)
	cookie, key := s.signIn(`{"code":"` + strings.TrimPrefix(s.console.LoginURL(s.url, "alice"), s.url+"/#code=") + `"}`)
	// The replay, as the other service sends it: the cookie, the Origin
	// forged, no key.
	if status, body, _ := s.post("/mcp", s.url, cookie, "", initialize); status != http.StatusUnauthorized {
		t.Fatalf("/mcp with the replayed cookie alone: %d %s", status, body)
	}
	if len(key) < 40 {
		t.Fatalf("the sign-in answered no console key (%q): the page has nothing but the cookie", key)
	}
	tok, _, err := s.tokens.Create(context.Background(), "mallory")
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey := s.signIn(`{"token":"` + tok + `"}`)

	for _, try := range []struct{ what, key string }{
		{"no key", ""},
		{"a made-up key", strings.Repeat("A", len(key))},
		{"the key of another sign-in", otherKey},
		{"the key with a byte changed", flip(key)},
	} {
		status, body, _ := s.postKey("/mcp", s.url, cookie, try.key, "", initialize)
		if status != http.StatusUnauthorized || strings.Contains(body, "serverInfo") {
			t.Fatalf("/mcp with the cookie and %s, Origin forged to the console's: %d %s", try.what, status, body)
		}
		call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"session_list","arguments":{}}}`
		if status, _, _ := s.postKey("/mcp", s.url, cookie, try.key, "", call); status != http.StatusUnauthorized {
			t.Fatalf("tools/call with the cookie and %s: %d", try.what, status)
		}
	}
	// No endpoint hands the key to a request that carries only the cookie.
	for _, body := range []string{`{}`, `{"code":""}`, `{"token":""}`} {
		_, resp, _ := s.post(LoginPath, s.url, cookie, "", body)
		if strings.Contains(resp, `"key"`) {
			t.Fatalf("sign-in with only the cookie and %s answered a key: %s", body, resp)
		}
	}
	// A replayed cookie cannot sign the person out either.
	s.post(LogoutPath, s.url, cookie, "", "")
	if ok, body := s.works(cookie, key); !ok {
		t.Fatalf("the console with its cookie and key after a replayed sign-out: %s", body)
	}
	// Signing out with the key ends the key too.
	if status, _, _ := s.postKey(LogoutPath, s.url, cookie, key, "", ""); status != http.StatusNoContent {
		t.Fatalf("sign-out with the key: %d", status)
	}
	if ok, _ := s.works(cookie, key); ok {
		t.Fatal("the cookie and key still work after sign-out")
	}
	if strings.Contains(s.logs.String(), key) {
		t.Fatal("the console key is in the logs")
	}
}

// flip changes the last character of s.
func flip(s string) string {
	last := "A"
	if strings.HasSuffix(s, "A") {
		last = "B"
	}
	return s[:len(s)-1] + last
}
