package main

// Raw HTTP helpers for the end-to-end tests that need to act below an MCP
// client: send a leaked session id, hold a connection open, read an SSE
// stream without keeping it.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
)

// rawMCP is a hand-driven MCP client over HTTP: one user (token), one MCP
// session id, no retries and no bookkeeping.
type rawMCP struct {
	t       testing.TB
	url     string
	token   string
	session string
	nextID  int
}

// do sends one HTTP request and returns the response; the caller closes it.
func (c *rawMCP) do(method, body string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, c.url, err)
	}
	return resp
}

// status sends a request and returns its status and body.
func (c *rawMCP) status(method, body string) (int, string) {
	c.t.Helper()
	resp := c.do(method, body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// request builds a JSON-RPC request with the next id.
func (c *rawMCP) request(method string, params any) string {
	c.nextID++
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.nextID, "method": method, "params": params})
	if err != nil {
		c.t.Fatal(err)
	}
	return string(b)
}

// initialize opens an MCP session and remembers its id.
func (c *rawMCP) initialize() {
	c.t.Helper()
	resp := c.do("POST", c.request("initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "raw", "version": "1"},
	}))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.session = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || c.session == "" {
		c.t.Fatalf("initialize: status %d, session %q", resp.StatusCode, c.session)
	}
	if code, body := c.status("POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		c.t.Fatalf("notifications/initialized: %d %s", code, body)
	}
}

// sse reads an SSE (or JSON) response body message by message and returns
// the final response; every message before it goes to each. Messages are
// not kept, so the stream can be far larger than memory.
func sse(t testing.TB, resp *http.Response, each func(map[string]any)) map[string]any {
	t.Helper()
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("response: %v", err)
		}
		return m
	}
	r := bufio.NewReaderSize(resp.Body, 1<<20)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("SSE stream ended before the response: %v", err)
		}
		data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("SSE data %.200q: %v", data, err)
		}
		if _, isResponse := m["id"]; isResponse && m["method"] == nil {
			return m
		}
		if each != nil {
			each(m)
		}
	}
}

// procStatus returns a field of /proc/<pid>/status in kB (VmRSS, VmHWM).
func procStatus(t testing.TB, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, v)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
