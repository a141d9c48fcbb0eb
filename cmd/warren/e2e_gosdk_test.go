package main

// The official Go SDK as a user would run it: its defaults, the newest
// protocol revision it negotiates (2026-07-28), over HTTP and over stdio.
// Such a client sends notifications/cancelled and logging/setLevel without
// the revision's _meta envelope; warren must neither refuse them nor drop
// the session.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// goSDKClient connects a default Go SDK client (no protocol version asked
// for) over tr; progress and log notifications are passed to the handlers.
func goSDKClient(t *testing.T, tr sdk.Transport, progress func(*sdk.ProgressNotificationParams), logs func(*sdk.LoggingMessageParams)) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "warren-e2e-gosdk", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			if progress != nil {
				progress(req.Params)
			}
		},
		LoggingMessageHandler: func(_ context.Context, req *sdk.LoggingMessageRequest) {
			if logs != nil {
				logs(req.Params)
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	// The point of these tests: the revision without sessions and with a
	// per-request envelope.
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("the Go SDK negotiated %q, want 2026-07-28", v)
	}
	return cs
}

// goSDKTransports are the two ways a user runs warren with the Go SDK.
func goSDKTransports(t *testing.T) map[string]func() sdk.Transport {
	return map[string]func() sdk.Transport{
		"http": func() sdk.Transport {
			srv := serveHTTP(t, "--data-dir", jailDir(t), "--auth", "none")
			return &sdk.StreamableClientTransport{Endpoint: srv.url, HTTPClient: http.DefaultClient, MaxRetries: -1}
		},
		"stdio": func() sdk.Transport {
			cmd := exec.Command(warrenBin, "serve", "stdio", "--data-dir", jailDir(t))
			cmd.Stderr = newTestLog(t, "server: ")
			return &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second}
		},
	}
}

// TestGoSDKCancelledCallKeepsTheSession: a Go SDK client cancels a long
// shell_exec; the command is interrupted and the same client session goes
// on making calls.
func TestGoSDKCancelledCallKeepsTheSession(t *testing.T) {
	needJail(t)
	for name, transport := range goSDKTransports(t) {
		t.Run(name, func(t *testing.T) {
			started := make(chan struct{})
			var once sync.Once
			cs := goSDKClient(t, transport(), func(p *sdk.ProgressNotificationParams) {
				if strings.Contains(p.Message, "started") {
					once.Do(func() { close(started) })
				}
			}, nil)
			call := func(ctx context.Context, command string) (*sdk.CallToolResult, error) {
				p := &sdk.CallToolParams{Name: "shell_exec", Arguments: map[string]any{"command": command}}
				p.SetProgressToken("p1")
				return cs.CallTool(ctx, p)
			}
			if res, err := call(context.Background(), "echo ready"); err != nil || res.IsError {
				t.Fatalf("first call: %v %v", err, res)
			}

			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := call(ctx, "echo started; sleep 60; echo finished")
				errc <- err
			}()
			select {
			case <-started:
			case err := <-errc:
				t.Fatalf("the long call ended before it was cancelled: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("no progress from the long command")
			}
			cancel()
			if err := <-errc; err == nil {
				t.Fatal("a cancelled call returned a result")
			}

			// The same client session goes on: the command was interrupted
			// (soon the session is no longer busy) and nothing of it runs.
			deadline := time.Now().Add(15 * time.Second)
			for {
				res, err := call(context.Background(), "ps -eo args | grep -c '^sleep 60$'")
				if err != nil {
					t.Fatalf("the session did not survive the cancellation: %v", err)
				}
				if !res.IsError {
					if out := structured(t, res); strings.TrimSpace(fmt.Sprint(out["stdout"])) != "0" {
						t.Fatalf("sleep 60 still runs after the call was cancelled: %v", out)
					}
					break
				}
				if !strings.Contains(textOf(res), "busy") || time.Now().After(deadline) {
					t.Fatalf("after the cancellation: %s", textOf(res))
				}
				time.Sleep(100 * time.Millisecond)
			}
			if _, err := cs.ListTools(context.Background(), nil); err != nil {
				t.Fatalf("tools/list after the cancellation: %v", err)
			}
		})
	}
}

// TestGoSDKLogLevelIsHonoured: a Go SDK client that sets a level with
// logging/setLevel gets notifications/message at that level, on both
// transports (the 2026-07-28 revision moved the level into each request's
// _meta, which this client does not fill).
func TestGoSDKLogLevelIsHonoured(t *testing.T) {
	needJail(t)
	for name, transport := range goSDKTransports(t) {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var logs []string
			cs := goSDKClient(t, transport(), nil, func(p *sdk.LoggingMessageParams) {
				mu.Lock()
				defer mu.Unlock()
				logs = append(logs, fmt.Sprintf("%s %v", p.Level, p.Data))
			})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "info"}); err != nil {
				t.Fatalf("logging/setLevel: %v", err)
			}
			run := func(command string) string {
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "shell_exec", Arguments: map[string]any{"command": command}})
				if err != nil {
					t.Fatalf("%s: %v", command, err)
				}
				return textOf(res)
			}
			run("true")
			if died := run("kill -9 $$") + run("echo alive"); !strings.Contains(died, "restarted") {
				t.Fatalf("the shell was not restarted: %q", died)
			}
			waitFor(t, "the notification that the shell restarted", 10*time.Second, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return strings.Contains(strings.Join(logs, "\n"), "restarted")
			})
		})
	}
}

// TestHTTPCancelReachesOnlyTheCallersOwnCall: on the 2026-07-28 revision
// there is no MCP session to scope a request id by; a notifications/cancelled
// from one user must still not cancel another user's call that happens to
// carry the same id.
func TestHTTPCancelReachesOnlyTheCallersOwnCall(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	srv := serveHTTP(t, "--data-dir", data)
	alice, mallory := createToken(t, data, "alice"), createToken(t, data, "mallory")
	post := func(ctx context.Context, token, body string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal([]byte(body), &m)
		req.Header.Set("Mcp-Method", m.Method)
		if m.Params.Name != "" {
			req.Header.Set("Mcp-Name", m.Params.Name)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	envelope := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	// Alice's call, with a progress token so that its stream says when
	// the command started.
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{},"progressToken":"a"},"name":"shell_exec",` +
		`"arguments":{"command":"echo started; sleep 3; echo finished"}}}`
	resp := post(context.Background(), alice, call)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("alice's call: %d %s", resp.StatusCode, b)
	}
	var cancelled bool
	final := sse(t, resp, func(m map[string]any) {
		if cancelled || m["method"] != "notifications/progress" {
			return
		}
		cancelled = true
		for _, body := range []string{
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`,
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{` + envelope + `,"requestId":7}}`,
		} {
			r := post(context.Background(), mallory, body)
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}
	})
	if !cancelled {
		t.Fatalf("no progress before the result: %v", final)
	}
	if b, _ := json.Marshal(final); !strings.Contains(string(b), "finished") {
		t.Fatalf("another user's notifications/cancelled cut alice's call: %s", b)
	}
}

// TestStdioEnvelopedSetLevelIsHonoured: a 2026-07-28 client over stdio
// that sends logging/setLevel with the revision's envelope (mcp-go alone
// answers "removed in this revision") gets its level, and then
// notifications/message for requests that name no level of their own.
func TestStdioEnvelopedSetLevelIsHonoured(t *testing.T) {
	needJail(t)
	cmd := exec.Command(warrenBin, "serve", "stdio", "--data-dir", jailDir(t))
	cmd.Stderr = newTestLog(t, "server: ")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	lines := make(chan map[string]any, 100)
	go func() {
		dec := json.NewDecoder(stdout)
		for {
			var m map[string]any
			if dec.Decode(&m) != nil {
				close(lines)
				return
			}
			lines <- m
		}
	}()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	var logs []string
	// send writes a request and returns its response; notifications read
	// meanwhile are kept.
	send := func(id int, method, params string) map[string]any {
		t.Helper()
		fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s%s}}`+"\n", id, method, meta, params)
		timeout := time.After(30 * time.Second)
		for {
			select {
			case m, ok := <-lines:
				if !ok {
					t.Fatalf("%s: the server closed stdout", method)
				}
				if m["method"] == "notifications/message" {
					b, _ := json.Marshal(m["params"])
					logs = append(logs, string(b))
				}
				if fmt.Sprint(m["id"]) == fmt.Sprint(id) {
					return m
				}
			case <-timeout:
				t.Fatalf("%s: no response", method)
			}
		}
	}
	// A client of this revision starts with server/discover.
	if r := send(0, "server/discover", ""); r["error"] != nil {
		t.Fatalf("server/discover: %v", r["error"])
	}
	if r := send(1, "logging/setLevel", `,"level":"info"`); r["error"] != nil {
		t.Fatalf("logging/setLevel: %v", r["error"])
	}
	call := `,"name":"shell_exec","arguments":{"command":%q}`
	send(2, "tools/call", fmt.Sprintf(call, "true"))
	out := send(3, "tools/call", fmt.Sprintf(call, "kill -9 $$"))
	out2 := send(4, "tools/call", fmt.Sprintf(call, "echo alive"))
	if b, _ := json.Marshal([]any{out, out2}); !strings.Contains(string(b), "restarted") {
		t.Fatalf("the shell was not restarted: %s", b)
	}
	// Notifications may follow their call's response: one more call.
	send(5, "tools/call", fmt.Sprintf(call, "true"))
	if !strings.Contains(strings.Join(logs, "\n"), "restarted") {
		t.Fatalf("no notification that the shell restarted; messages: %q", logs)
	}
}
