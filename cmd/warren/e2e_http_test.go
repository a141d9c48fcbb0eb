package main

import (
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestHTTPTokensOriginsAndIsolation(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	aliceTok, bobTok := createToken(t, data, "alice"), createToken(t, data, "bob")
	srv := serveHTTP(t, "--data-dir", data)

	// Raw HTTP: no token, a wrong token, a foreign Origin.
	for _, tc := range []struct {
		name, token, origin string
		want                int
	}{
		{"no token", "", "", http.StatusUnauthorized},
		{"bad token", "wrn_nope", "", http.StatusUnauthorized},
		{"foreign origin", aliceTok, "http://evil.example", http.StatusForbidden},
	} {
		req, _ := http.NewRequest("POST", srv.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
	resp, err := http.Get(strings.TrimSuffix(srv.url, "/mcp") + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", resp, err)
	}
	resp.Body.Close()

	alice, bob := connectHTTP(t, srv, aliceTok), connectHTTP(t, srv, bobTok)
	a := alice.exec("export WHO=alice; echo secret > mine.txt")
	aliceSession := a["session_id"].(string)
	b := bob.exec("echo $WHO; ls")
	if b["session_id"] == aliceSession || b["stdout"] != "\n" {
		t.Fatalf("bob sees alice's session: %v", b)
	}
	// Alice's session does not exist for bob, in any tool.
	bob.fails("shell_exec", map[string]any{"command": "cat mine.txt", "session_id": aliceSession}, "session not found")
	bob.fails("read_file", map[string]any{"path": "mine.txt", "session_id": aliceSession}, "session not found")
	bob.fails("shell_kill", map[string]any{"session_id": aliceSession}, "session not found")

	// A second connection of alice's works in the same workspace session.
	again := connectHTTP(t, srv, aliceTok)
	if got := again.exec("echo $WHO; cat mine.txt"); got["stdout"] != "alice\nsecret\n" || got["session_id"] != aliceSession {
		t.Fatalf("alice reconnecting: %v", got)
	}
	// Bad arguments over HTTP are tool errors too.
	alice.fails("read_file", map[string]any{"path": "/etc/passwd"}, "outside the workspace")
}

func TestHTTPProgressArrivesBeforeTheResult(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	srv := serveHTTP(t, "--data-dir", data, "--auth", "none")
	user := connectHTTP(t, srv, "")
	for i := range 5 {
		token := "http-" + string(rune('a'+i))
		res, progress := user.callWithProgress("for i in 1 2 3; do echo chunk $i; sleep 0.05; done", token)
		if progress != res["stdout"] {
			t.Fatalf("run %d: progress before the result was %q, stdout %q", i, progress, res["stdout"])
		}
	}
}

func TestHTTPRefusesUnsafeListening(t *testing.T) {
	for _, args := range [][]string{
		{"--addr", "0.0.0.0:0"},
		{"--addr", "0.0.0.0:0", "--allow-remote", "--auth", "none"},
	} {
		cmd := exec.Command(warrenBin, append([]string{"serve", "http", "--data-dir", t.TempDir()}, args...)...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("serve http %v started", args)
		}
		if !strings.Contains(string(out), "loopback") {
			t.Fatalf("serve http %v: %s", args, out)
		}
	}
}

func TestHTTPFirstStartPrintsAToken(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	cmd := exec.Command(warrenBin, "serve", "http", "--addr", "127.0.0.1:0", "--data-dir", data)
	out := &syncBuffer{}
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var tok, url string
	for i := 0; i < 100 && tok == ""; i++ {
		time.Sleep(50 * time.Millisecond)
		for _, line := range strings.Split(out.String(), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "Token:" {
				tok = f[1]
			} else if len(f) == 2 && f[0] == "URL:" {
				url = f[1]
			}
		}
	}
	if tok == "" || url == "" {
		t.Fatalf("no token printed on first start: %q", out.String())
	}
	user := connectHTTP(t, &httpServer{url: url}, tok)
	if got := user.exec("echo hi"); got["stdout"] != "hi\n" {
		t.Fatalf("with the printed token: %v", got)
	}
}

// syncBuffer is a strings.Builder safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
