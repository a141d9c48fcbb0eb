package mcp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
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
	if err != nil {
		// The server may answer and close while the client still sends:
		// that is a refusal only if the connection was cut, not if the
		// client never got through.
		if !strings.Contains(err.Error(), "reset") && !strings.Contains(err.Error(), "broken pipe") && !strings.Contains(err.Error(), "EOF") {
			t.Fatalf("streamed oversized body: %v", err)
		}
		return
	}
	msg, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(msg), "over the limit") {
		t.Fatalf("streamed oversized body was not refused: %d %.200q", resp.StatusCode, msg)
	}
}

// testClient drives the HTTP handler by hand, as one user.
type testClient struct {
	t              *testing.T
	url, token, id string
}

func (c *testClient) send(method, body string) (*http.Response, string) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.id != "" {
		req.Header.Set("Mcp-Session-Id", c.id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func (c *testClient) initialize() {
	c.t.Helper()
	resp, body := c.send("POST", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	c.id = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || c.id == "" {
		c.t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	if resp, body := c.send("POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("initialized: %d %s", resp.StatusCode, body)
	}
}

// TestHTTPSessionEventsAreFreed: what the event store keeps of a session's
// progress is bounded while it streams and gone once the session ends.
func TestHTTPSessionEventsAreFreed(t *testing.T) {
	srv, err := New(Options{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	chunk := strings.Repeat("x", 10<<10)
	srv.mcp.AddTool(mcpgo.NewTool("emit"), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		p := newProgress(ctx, srv.deps.notes, req)
		for range 500 { // 5 MB
			p.add([]byte(chunk))
		}
		p.finish()
		return mcpgo.NewToolResultText("done"), nil
	})
	ts := httptest.NewServer(srv.HTTPHandler(HTTPOptions{LocalUser: "me"}))
	defer ts.Close()
	c := &testClient{t: t, url: ts.URL + "/mcp"}
	c.initialize()
	_, body := c.send("POST", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"emit","_meta":{"progressToken":"p"}}}`)
	if !strings.Contains(body, `"done"`) || strings.Count(body, "notifications/progress") < 300 {
		t.Fatalf("call: %d progress notifications, body ends %q", strings.Count(body, "notifications/progress"), body[max(0, len(body)-200):])
	}
	if kept := srv.events.kept(c.id); kept == 0 || kept > eventsPerSession {
		t.Fatalf("the session's events take %d bytes, bound %d", kept, eventsPerSession)
	}
	if resp, body := c.send("DELETE", ""); resp.StatusCode != 200 {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
	}
	if kept := srv.events.kept(""); kept != 0 {
		t.Fatalf("after DELETE the store keeps %d bytes", kept)
	}
	if n := srv.owners.count(); n != 0 {
		t.Fatalf("after DELETE %d MCP sessions are known", n)
	}
}
