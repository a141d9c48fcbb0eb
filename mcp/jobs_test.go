package mcp

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/warrenhq/warren/sandbox"
)

// TestALeftRunningJobIsLoggedToItsEnd: a command that outlives its call's
// yield and that nobody waits for still has its output closed in the
// activity log when it ends: past the log's cap, the note of what was left
// out comes only then.
func TestALeftRunningJobIsLoggedToItsEnd(t *testing.T) {
	srv, activity := newJailServer(t, Options{})
	ctx := WithUser(context.Background(), testUser)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell_exec","arguments":` +
		`{"command":"sleep 0.5; head -c 300000 /dev/zero | tr '\\0' x","yield_ms":100}}}`
	out, _ := json.Marshal(srv.MCPServer().HandleMessage(ctx, json.RawMessage(call)))
	var resp struct {
		Result struct {
			Structured ShellResult `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out, &resp); err != nil || !resp.Result.Structured.Running {
		t.Fatalf("want a job left running: %s", out)
	}
	session := resp.Result.Structured.SessionID
	const note = "more bytes of output not kept in the activity log"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		evs, _, err := activity.After(context.Background(), session, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if strings.Contains(e.Text, note) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job ended long ago and its output in the activity log has no note of what was left out (%d events)", len(evs))
		}
	}
}

// TestAStalledProgressStreamHoldsNoSharedLock: a command whose caller reads
// its progress stream slower than the command writes waits for the stream
// (up to lagWait a chunk); meanwhile the jobs of every session must stay
// usable. Leaving a job running (the yield of its call) takes the lock of
// every session's jobs: it must complete while the output is still held up
// by the stalled stream, or every user's shell_exec waits for one client.
func TestAStalledProgressStreamHoldsNoSharedLock(t *testing.T) {
	req := mcp.CallToolRequest{}
	req.Params.Meta = &mcp.Meta{ProgressToken: "p"}
	// A notifier with no MCP server delivers nothing: the stream never
	// drains, as with a client that stopped reading.
	p := newProgress(context.Background(), newNotifier(), req)
	defer p.finish()
	js := newJobs()
	j := &job{id: "j-test", done: make(chan struct{})}
	j.setListener(p)
	j.output(sandbox.Stdout, make([]byte, maxPending)) // the stream's buffer is full now

	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		j.output(sandbox.Stdout, []byte("x")) // waits for the stream
	}()
	// Wait until the chunk is the job's: the output call is then waiting
	// for the stream (or, holding the job's lock across it, has made this
	// wait until the stream gave up).
	for {
		j.mu.Lock()
		n := len(j.pending[0]) + int(j.dropped[0]) // the job keeps the tail
		j.mu.Unlock()
		if n == maxPending+1 {
			break
		}
		runtime.Gosched()
	}
	select {
	case <-outDone:
		t.Fatal("reading the job's output waited until its stalled progress stream gave up: the job's lock is held across the stream")
	default:
	}
	leaveDone := make(chan struct{})
	go func() {
		defer close(leaveDone)
		js.leave(j)
	}()
	select {
	case <-leaveDone:
	case <-outDone:
		t.Fatal("leaving the job running waited for its stalled progress stream, holding every session's jobs")
	}
}
