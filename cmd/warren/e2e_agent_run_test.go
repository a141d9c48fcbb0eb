package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	pt "github.com/warrenhq/warren/agent/provider/providertest"
)

// TestAgentRunFromTheGoSDKWithElicitation: an MCP client calls agent_run;
// the agent's two destructive calls are put to the client, which approves
// the first and declines the second; the approved one really ran in the
// jail and the declined one did not.
func TestAgentRunFromTheGoSDKWithElicitation(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	model := pt.New(pt.OpenAI,
		pt.Reply{Calls: []pt.Call{{Name: "shell_exec", Args: `{"command":"echo yes > approved.txt"}`}}},
		pt.Reply{Calls: []pt.Call{{Name: "shell_exec", Args: `{"command":"echo no > declined.txt"}`}}},
		pt.Reply{Text: "One ran, one was declined."})
	defer model.Close()
	cfg := `{"agent": {"model": "gpt-4.1-mini", "base_url": "` + model.BaseURL() + `", "api_key": "sk-config-key", "policy": {"approval": "ask"}}}`
	if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := serveHTTP(t, "--data-dir", data)
	token := createToken(t, data, "carol")

	var asked atomic.Int32
	var progress atomic.Int32
	c := sdk.NewClient(&sdk.Implementation{Name: "sdk-e2e", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			if asked.Add(1) == 1 {
				return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			}
			return &sdk.ElicitResult{Action: "decline"}, nil
		},
		ProgressNotificationHandler: func(ctx context.Context, req *sdk.ProgressNotificationClientRequest) { progress.Add(1) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: srv.url,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}, MaxRetries: -1},
		// Approvals mid-run are server-initiated requests: 2025-11-25.
		&sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &sdk.CallToolParams{Name: "agent_run", Arguments: map[string]any{"prompt": "make two files"}}
	params.SetProgressToken("run-1")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("agent_run failed: %s", textOf(res))
	}
	out := structured(t, res)
	if out["ended"] != "done" || out["answer"] != "One ran, one was declined." {
		t.Fatalf("output %v", out)
	}
	calls, _ := out["tool_calls"].([]any)
	if len(calls) != 2 || asked.Load() != 2 {
		t.Logf("model saw: %v", model.Requests()[1].Messages[len(model.Requests()[1].Messages)-1])
		t.Fatalf("tool calls %v, asked %d", calls, asked.Load())
	}
	ws := filepath.Join(data, "workspaces", out["session_id"].(string))
	if b, err := os.ReadFile(filepath.Join(ws, "approved.txt")); err != nil || string(b) != "yes\n" {
		t.Errorf("approved.txt %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "declined.txt")); err == nil {
		t.Error("the declined command ran")
	}
	reqs := model.Requests()
	if last := reqs[2].Messages; !strings.Contains(last[len(last)-1]["content"].(string), "declined") {
		t.Errorf("the model was not told of the refusal: %v", last[len(last)-1])
	}
	if progress.Load() == 0 {
		t.Error("no progress notifications: the agent's events must stream")
	}
	// The model calls are usage records of the client "agent_run/sdk-e2e".
	rep, _, _ := chatRunPlain(t, data, "usage", "report", "--group-by", "client", "--format", "json", "--all-users")
	if !strings.Contains(rep, "agent_run/sdk-e2e") {
		t.Errorf("usage by client:\n%s", rep)
	}
}
