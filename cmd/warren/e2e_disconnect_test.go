package main

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHTTPDisconnectInterruptsTheCommand: a client that goes away in the
// middle of a shell_exec (its HTTP request is aborted) must not leave the
// command running and the session busy.
func TestHTTPDisconnectInterruptsTheCommand(t *testing.T) {
	srv := serveHTTP(t, "--data-dir", jailDir(t), "--auth", "none")
	c := connectHTTP(t, srv, "")
	session := c.exec("echo ready")["session_id"].(string)

	// A raw streamable-HTTP client: initialize, then a call whose request
	// is aborted after half a second.
	post := func(ctx context.Context, mcpSession, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if mcpSession != "" {
			req.Header.Set("Mcp-Session-Id", mcpSession)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		return http.DefaultClient.Do(req)
	}
	resp, err := post(context.Background(), "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mcpSession := resp.Header.Get("Mcp-Session-Id")
	if resp, err := post(context.Background(), mcpSession, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err == nil {
		resp.Body.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	started := time.Now()
	resp, err = post(ctx, mcpSession, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"shell_exec",`+
		`"arguments":{"command":"sleep 30; echo finished","session_id":"`+session+`"}}}`)
	if err == nil {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "finished") || strings.Contains(sc.Text(), "not found") {
				t.Fatalf("the call was not cut off: %s", sc.Text())
			}
		}
		resp.Body.Close()
	}
	if time.Since(started) < 400*time.Millisecond {
		t.Fatalf("the call ended after %v, before the client went away: %v", time.Since(started), err)
	}

	// The session is free again, soon, and the sleep is gone.
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := c.call("shell_exec", map[string]any{"command": "ps -eo args | grep -c '^sleep 30$'", "session_id": session})
		if !res.IsError {
			out := structured(t, res)
			if strings.TrimSpace(out["stdout"].(string)) != "0" {
				t.Fatalf("sleep 30 still runs after the client went away: %v", out)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session stayed busy after the client went away: %s", textOf(res))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
