package main

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// TestHTTPCompressesJSONAnswersNotStreams: a client that accepts gzip gets
// JSON answers (tools/list is some 45 KB) gzipped, and the same JSON; a
// client that does not gets them plain; an SSE stream is never gzipped
// and still streams: progress arrives while the command runs.
func TestHTTPCompressesJSONAnswersNotStreams(t *testing.T) {
	needJail(t)
	srv := serveHTTP(t, "--data-dir", jailDir(t), "--auth", "none")
	c := &rawMCP{t: t, url: srv.url}
	c.initialize()
	// No transparent decompression: the test sees the bytes on the wire.
	raw := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	post := func(acceptEncoding, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("POST", srv.url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		req.Header.Set("Mcp-Session-Id", c.session)
		if acceptEncoding != "" {
			req.Header.Set("Accept-Encoding", acceptEncoding)
		}
		resp, err := raw.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	decode := func(what string, r io.Reader) any {
		t.Helper()
		var v any
		if err := json.NewDecoder(r).Decode(&v); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}

	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	plainResp := post("", list)
	if enc := plainResp.Header.Get("Content-Encoding"); enc != "" {
		t.Fatalf("without Accept-Encoding the answer is encoded: %q", enc)
	}
	plainBody, _ := io.ReadAll(plainResp.Body)
	plainResp.Body.Close()
	plain := decode("plain tools/list", strings.NewReader(string(plainBody)))

	gzResp := post("gzip, deflate", list)
	defer gzResp.Body.Close()
	if enc := gzResp.Header.Get("Content-Encoding"); enc != "gzip" {
		t.Fatalf("Accept-Encoding gzip: Content-Encoding %q, want gzip", enc)
	}
	if ct := gzResp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("gzipped answer has Content-Type %q", ct)
	}
	wire, _ := io.ReadAll(gzResp.Body)
	zr, err := gzip.NewReader(strings.NewReader(string(wire)))
	if err != nil {
		t.Fatalf("the gzipped answer does not gunzip: %v", err)
	}
	if got := decode("gunzipped tools/list", zr); !reflect.DeepEqual(got, plain) {
		t.Fatal("the gunzipped tools/list differs from the plain one")
	}
	t.Logf("tools/list: %d bytes plain, %d gzipped", len(plainBody), len(wire))
	if len(wire)*3 > len(plainBody) {
		t.Fatalf("tools/list gzipped to %d of %d bytes", len(wire), len(plainBody))
	}
	if resp := post("gzip;q=0", list); resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("gzip;q=0 (refused) got Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	} else {
		resp.Body.Close()
	}

	// A call with a progress token answers with an SSE stream: the command
	// waits until the test has seen its progress and written the file it
	// waits for, so the result can only come after progress that streamed.
	var ready struct {
		Result struct {
			StructuredContent struct {
				SessionID string `json:"session_id"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	readyResp := post("gzip", c.request("tools/call", map[string]any{"name": "shell_exec", "arguments": map[string]any{"command": "true"}}))
	if err := json.Unmarshal([]byte(mustJSON(t, sse(t, readyResp, nil))), &ready); err != nil || ready.Result.StructuredContent.SessionID == "" {
		t.Fatalf("first call: %v %+v", err, ready)
	}
	session := ready.Result.StructuredContent.SessionID
	resp := post("gzip", c.request("tools/call", map[string]any{
		"name": "shell_exec", "_meta": map[string]any{"progressToken": "p"},
		"arguments": map[string]any{"session_id": session, "command": "echo started; i=0; while [ ! -e go ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done; " +
			"[ -e go ] && echo after-progress || echo no-progress-seen"},
	}))
	if enc := resp.Header.Get("Content-Encoding"); enc != "" {
		t.Fatalf("an SSE stream is encoded %q", enc)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("the call did not stream: Content-Type %q", ct)
	}
	wrote := false
	final := sse(t, resp, func(m map[string]any) {
		if m["method"] != "notifications/progress" || wrote {
			return
		}
		wrote = true
		other := &rawMCP{t: t, url: srv.url}
		other.initialize()
		code, body := other.status("POST", other.request("tools/call", map[string]any{
			"name": "write_file", "arguments": map[string]any{"session_id": session, "path": "go", "content": "x"}}))
		if code != http.StatusOK || strings.Contains(body, `"isError":true`) {
			t.Errorf("write_file while the command runs: %d %s", code, body)
		}
	})
	if b, _ := json.Marshal(final); !strings.Contains(string(b), "after-progress") {
		t.Fatalf("the result came without streamed progress first: %s", b)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
