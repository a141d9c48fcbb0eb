package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
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
