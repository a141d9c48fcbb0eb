package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// A tool's live output reaches the agent only while its call runs: the
// MCP client hands notifications to their handler on a goroutine of its
// own, so a progress line sent just before the result could be delivered
// after the call returned, and `warren chat --output stream-json` then
// printed a progress event after its run's done event.
func TestProgressNeverOutlivesItsCall(t *testing.T) {
	srv := server.NewMCPServer("t", "1")
	srv.AddTool(mcp.NewTool("speak"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tok := req.Params.Meta.ProgressToken
		_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/progress",
			map[string]any{"progressToken": tok, "progress": 1, "message": "hi\n"})
		return mcp.NewToolResultText("done"), nil
	})
	ctx := context.Background()
	tools, err := ConnectInProcess(ctx, srv, nil, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer tools.Close()
	for range 20 {
		var (
			mu     sync.Mutex
			events []string
		)
		add := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
		_, _, err := tools.Call(ctx, "speak", nil, func(string) {
			time.Sleep(20 * time.Millisecond) // a slow reader of the output
			add("progress")
		})
		if err != nil {
			t.Fatal(err)
		}
		add("returned")
		time.Sleep(40 * time.Millisecond) // a late delivery would land here
		mu.Lock()
		got := events
		mu.Unlock()
		if got[len(got)-1] != "returned" {
			t.Fatalf("events %v: output delivered after its call returned", got)
		}
	}
}
