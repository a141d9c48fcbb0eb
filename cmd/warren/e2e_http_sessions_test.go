package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestHTTPSessionIdsAreBoundToTheirUser: an MCP session id that leaks to
// another user is worth nothing to them. Bob, holding alice's
// Mcp-Session-Id, gets 404 for every method, receives none of her live
// output and cannot end her session; a session alice ended is gone for her
// too.
func TestHTTPSessionIdsAreBoundToTheirUser(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	aliceTok, bobTok := createToken(t, data, "alice"), createToken(t, data, "bob")
	srv := serveHTTP(t, "--data-dir", data)

	alice := &rawMCP{t: t, url: srv.url, token: aliceTok}
	alice.initialize()
	// Make sure her workspace session exists before the race below.
	if code, body := alice.status("POST", alice.request("tools/call", map[string]any{
		"name": "shell_exec", "arguments": map[string]any{"command": "true"}})); code != http.StatusOK {
		t.Fatalf("alice's first call: %d %s", code, body)
	}

	// Alice runs a command that prints 40 lines over 2 s, with progress.
	var progress strings.Builder
	var final map[string]any
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp := alice.do("POST", alice.request("tools/call", map[string]any{
			"name":      "shell_exec",
			"arguments": map[string]any{"command": "for i in $(seq 40); do echo line $i; sleep 0.05; done"},
			"_meta":     map[string]any{"progressToken": "alice-live"},
		}))
		final = sse(t, resp, func(m map[string]any) {
			if p, ok := m["params"].(map[string]any); ok && m["method"] == "notifications/progress" {
				progress.WriteString(fmt.Sprint(p["message"]))
			}
		})
	}()

	// Meanwhile bob replays her session id with every method, many times.
	bob := &rawMCP{t: t, url: srv.url, token: bobTok, session: alice.session}
	attempts, reported := 0, map[string]bool{}
race:
	for {
		select {
		case <-done:
			break race
		default:
		}
		for _, m := range []struct{ method, body string }{
			{"POST", bob.request("ping", nil)},
			{"POST", bob.request("tools/call", map[string]any{"name": "shell_exec", "arguments": map[string]any{"command": "echo bob"}})},
			{"GET", ""},
			{"DELETE", ""},
		} {
			if code, body := bob.status(m.method, m.body); code != http.StatusNotFound && !reported[m.method+m.body[:min(len(m.body), 40)]] {
				reported[m.method+m.body[:min(len(m.body), 40)]] = true
				t.Errorf("bob %s with alice's session id: %d %.200s, want 404", m.method, code, body)
			}
		}
		attempts++
	}
	if attempts == 0 {
		t.Fatal("bob never tried while alice's command ran")
	}
	<-done
	want := ""
	for i := 1; i <= 40; i++ {
		want += fmt.Sprintf("line %d\n", i)
	}
	if progress.String() != want {
		t.Errorf("alice's progress lost lines to bob: got %d bytes, want %d", progress.Len(), len(want))
	}
	res, _ := final["result"].(map[string]any)
	if sc, _ := res["structuredContent"].(map[string]any); sc == nil || sc["stdout"] != want {
		t.Errorf("alice's result: %v", final)
	}

	// Her session survived bob's DELETEs; once she ends it, it is gone.
	if code, body := alice.status("POST", alice.request("ping", nil)); code != http.StatusOK {
		t.Fatalf("alice after bob's DELETE: %d %s", code, body)
	}
	if code, body := alice.status("DELETE", ""); code != http.StatusOK {
		t.Fatalf("alice ends her session: %d %s", code, body)
	}
	for _, m := range []string{"POST", "DELETE"} {
		body := ""
		if m == "POST" {
			body = alice.request("ping", nil)
		}
		if code, msg := alice.status(m, body); code != http.StatusNotFound {
			t.Errorf("%s on a terminated session: %d %.200s, want 404", m, code, msg)
		}
	}
}

// TestHTTPProgressMemoryIsBounded: 200 MB of output streamed as progress
// notifications does not stay in the server's memory.
func TestHTTPProgressMemoryIsBounded(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	srv := serveHTTP(t, "--data-dir", data, "--auth", "none")
	c := &rawMCP{t: t, url: srv.url}
	c.initialize()
	const size = 200_000_000
	var got int64
	resp := c.do("POST", c.request("tools/call", map[string]any{
		"name":      "shell_exec",
		"arguments": map[string]any{"command": fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x", size), "timeout_ms": 300000},
		"_meta":     map[string]any{"progressToken": "big"},
	}))
	final := sse(t, resp, func(m map[string]any) {
		if p, ok := m["params"].(map[string]any); ok && m["method"] == "notifications/progress" {
			got += int64(len(fmt.Sprint(p["message"])))
		}
	})
	if final["result"] == nil || got != size {
		t.Fatalf("streamed %d of %d bytes as progress; response %.300v", got, size, final)
	}
	peak := procStatus(t, srv.cmd.Process.Pid, "VmHWM")
	rss := procStatus(t, srv.cmd.Process.Pid, "VmRSS")
	t.Logf("server after streaming %d MB: peak RSS %d MB, RSS %d MB", size>>20, peak>>10, rss>>10)
	// The server itself needs a few tens of MB; keeping the stream would
	// take more than its size.
	if peak > 160<<10 {
		t.Errorf("server peak RSS %d MB while streaming %d MB of progress: notifications are kept", peak>>10, size>>20)
	}
	if code, body := c.status("DELETE", ""); code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", code, body)
	}
}
