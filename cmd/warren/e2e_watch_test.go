package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// watchedEvent is one event of session_watch as a client decodes it.
type watchedEvent struct {
	Seq     int64  `json:"seq"`
	Kind    string `json:"kind"`
	CallID  string `json:"call_id"`
	Tool    string `json:"tool"`
	Client  string `json:"client"`
	Summary string `json:"summary"`
	Stream  string `json:"stream"`
	Text    string `json:"text"`
	IsError bool   `json:"is_error"`
}

// TestWatchShowsAnotherClientsShellLive: a watcher sees, while it happens,
// what a separate client does in the same session: the call with its
// command, its output line by line while the command still runs, another
// client's file write, and the outcome; secrets redacted; another user
// cannot watch.
func TestWatchShowsAnotherClientsShellLive(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	aliceTok, bobTok := createToken(t, data, "alice"), createToken(t, data, "bob")
	srv := serveHTTP(t, "--data-dir", data)
	agent := connectHTTP(t, srv, aliceTok)
	session := agent.exec("echo ready")["session_id"].(string)

	// The watcher is another connection of alice's, reading progress.
	var (
		mu       sync.Mutex
		streamed []watchedEvent
		running  atomic.Bool // the agent's command has not returned yet
		liveLine = make(chan struct{})
		once     sync.Once
	)
	opts := &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
		var batch struct{ Events []watchedEvent }
		if json.Unmarshal([]byte(req.Params.Message), &batch) != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		streamed = append(streamed, batch.Events...)
		for _, e := range batch.Events {
			if e.Kind == "output" && strings.Contains(e.Text, "line 1") && running.Load() {
				once.Do(func() { close(liveLine) })
			}
		}
	}}
	cl := sdk.NewClient(&sdk.Implementation{Name: "watcher", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	watcher, err := cl.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: srv.url,
		HTTPClient: &http.Client{Transport: bearer{aliceTok, http.DefaultTransport}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()

	// What happened before the watcher came: the first command.
	first := watchCall(t, watcher, map[string]any{"session_id": session}, "")
	if len(first.Events) < 2 || first.Events[0].Kind != "call" || first.Events[0].Summary != "echo ready" ||
		first.Events[0].Client != "warren-e2e" {
		t.Fatalf("history: %+v", first.Events)
	}

	// The watcher follows the session as a client would, call after call
	// from its cursor; the agent runs a command that prints a line, then
	// waits for a file that a third client writes once the watcher has
	// seen that line.
	check := func(evs []watchedEvent) {
		for _, e := range evs {
			if e.Kind == "output" && strings.Contains(e.Text, "line 1") && running.Load() {
				once.Do(func() { close(liveLine) })
			}
		}
	}
	stop := make(chan struct{})
	watched := make(chan []watchedEvent, 1)
	go func() {
		var evs []watchedEvent
		cursor := first.Cursor
		for i := 0; i < 20; i++ {
			select {
			case <-stop: // the agent's call returned: its outcome is logged
				w := watchCall(t, watcher, map[string]any{"session_id": session, "after": cursor}, "")
				watched <- append(evs, w.Events...)
				return
			default:
			}
			w := watchCall(t, watcher, map[string]any{"session_id": session, "after": cursor, "wait_ms": 3000}, fmt.Sprintf("w-%d", i))
			check(w.Events)
			evs, cursor = append(evs, w.Events...), max(cursor, w.Cursor)
		}
		watched <- evs
	}()
	agentDone := make(chan map[string]any, 1)
	running.Store(true)
	go func() {
		defer running.Store(false)
		agentDone <- agent.exec("echo line 1; echo token=sk-abcdefghijklmnopqrstuvwxyz012345; " +
			"while [ ! -f go ]; do sleep 0.05; done; echo line 2; exit 3")
	}()
	select {
	case <-liveLine:
	case <-time.After(30 * time.Second):
		t.Fatal("the watcher did not see the agent's first line while the command ran")
	}
	other := connectHTTP(t, srv, aliceTok)
	other.ok("write_file", map[string]any{"session_id": session, "path": "go", "content": "now"})
	if res := <-agentDone; res["exit_code"] != float64(3) || !strings.Contains(res["stdout"].(string), "line 2") {
		t.Fatalf("agent's command: %v", res)
	}
	close(stop)
	got := <-watched
	all := append(append([]watchedEvent{}, first.Events...), got...)
	var out strings.Builder
	var calls, results []watchedEvent
	for _, e := range all {
		switch e.Kind {
		case "output":
			out.WriteString(e.Text)
		case "call":
			calls = append(calls, e)
		case "result":
			results = append(results, e)
		}
	}
	if !strings.Contains(out.String(), "line 1\n") || strings.Contains(out.String(), "sk-abcdefghij") ||
		!strings.Contains(out.String(), "[REDACTED]") {
		t.Fatalf("output in the feed: %q", out.String())
	}
	if !containsEvent(calls, "shell_exec", "while [ ! -f go ]") || !containsEvent(calls, "write_file", "path=go") {
		t.Fatalf("calls in the feed: %+v", calls)
	}
	for _, e := range calls {
		if strings.Contains(e.Summary, "sk-abcdefghij") {
			t.Fatalf("a secret in a call summary: %+v", e)
		}
	}
	if !containsEvent(results, "write_file", "") {
		t.Fatalf("the write's result is missing: %+v", results)
	}
	// The command's outcome arrives once it ended: a later watch has it.
	exitOf := func(results []watchedEvent) *watchedEvent {
		for i, e := range results {
			if e.Tool == "shell_exec" && strings.HasPrefix(e.Summary, "exit 3") {
				return &results[i]
			}
		}
		return nil
	}
	exit := exitOf(results)
	if exit == nil || !exit.IsError {
		t.Fatalf("no failed outcome 'exit 3' for the command: %+v", results)
	}
	mu.Lock()
	n := len(streamed)
	mu.Unlock()
	if n == 0 {
		t.Fatal("nothing was streamed as progress")
	}

	// The listing shows when the session was last used, and its disk use.
	var listed map[string]any
	for _, s := range agent.ok("session_list", nil)["sessions"].([]any) {
		if m := s.(map[string]any); m["session_id"] == session {
			listed = m
		}
	}
	if at, _ := listed["last_activity"].(string); at == "" || listed["disk_bytes"] == nil || listed["disk_bytes"].(float64) <= 0 {
		t.Fatalf("session_list: %v: want last_activity and disk_bytes", listed)
	}

	// Bob cannot watch alice's session.
	bob := connectHTTP(t, srv, bobTok)
	bob.fails("session_watch", map[string]any{"session_id": session}, "session not found")
}

type watchResult struct {
	Events []watchedEvent `json:"events"`
	Cursor int64          `json:"cursor"`
	More   bool           `json:"more"`
}

func watchCall(t *testing.T, cs *sdk.ClientSession, args map[string]any, progress string) watchResult {
	p := &sdk.CallToolParams{Name: "session_watch", Arguments: args}
	if progress != "" {
		p.SetProgressToken(progress)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Errorf("session_watch: %v", err)
		return watchResult{}
	}
	if res.IsError {
		t.Errorf("session_watch: %s", textOf(res))
		return watchResult{}
	}
	var w watchResult
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &w); err != nil {
		t.Errorf("session_watch result %s: %v", b, err)
	}
	return w
}

func containsEvent(evs []watchedEvent, tool, summary string) bool {
	for _, e := range evs {
		if e.Tool == tool && strings.Contains(e.Summary, summary) {
			return true
		}
	}
	return false
}

func filterKind(evs []watchedEvent, kind string) []watchedEvent {
	var out []watchedEvent
	for _, e := range evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}
