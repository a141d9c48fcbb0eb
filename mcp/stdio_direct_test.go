package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// A response written beside mcp-go is, byte for byte, the one mcp-go
// writes (json.Marshal of the message), for every kind of tool result and
// id, and for messages that are not tool results.
func TestStdioResponseIsWhatMCPGoWrites(t *testing.T) {
	text := "line <one> & \"two\"\n\u2028 tab\t é \x01"
	structured := mcp.NewToolResultStructured(ReadFileOutput{Path: "/workspace/<a>", Content: text, TotalLines: 2}, text)
	withImage := mcp.NewToolResultText("an image")
	withImage.Content = append(withImage.Content, mcp.NewImageContent("aGVsbG8=", "image/png"))
	withMeta := mcp.NewToolResultError("refused: <why>")
	withMeta.Meta = mcp.NewMetaFromMap(map[string]any{"k": "v<"})
	results := []any{structured, *structured, withImage, withMeta, mcp.NewToolResultText("")}
	ids := []mcp.RequestId{mcp.NewRequestId(int64(7)), mcp.NewRequestId("req-<1>"), mcp.NewRequestId(3.0)}
	for _, id := range ids {
		for _, r := range results {
			msg := mcp.NewJSONRPCResultResponse(id, r)
			want, err := json.Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := encodeResponse(msg)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("id %v:\n got %s (%v)\nwant %s", id, got, err, want)
			}
		}
		for _, msg := range []mcp.JSONRPCMessage{
			mcp.NewJSONRPCError(id, mcp.INVALID_PARAMS, "bad <params>", nil),
			mcp.NewJSONRPCResultResponse(id, mcp.ListToolsResult{}),
			mcp.NewJSONRPCResultResponse(id, (*mcp.CallToolResult)(nil)),
		} {
			want, _ := json.Marshal(msg)
			if got, err := encodeResponse(msg); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%T: got %s (%v), want %s", msg, got, err, want)
			}
		}
	}
}

// lockedBuffer keeps what is written, one Write at a time.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.b.String()), "\n")
}

// More tool calls at once than are served beside mcp-go all get their
// answer (the rest queue in mcp-go, as before), each a whole line; a line
// that only looks like a tool call gets mcp-go's parse error; the client
// closing its input ends the calls still running, as mcp-go ends its own.
func TestStdioToolCallsBesideMCPGo(t *testing.T) {
	srv := server.NewMCPServer("t", "1", server.WithToolCapabilities(false))
	release := make(chan struct{})
	var running atomic.Int32
	srv.AddTool(mcp.NewTool("wait"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		running.Add(1)
		select {
		case <-release:
			return mcp.NewToolResultText("done " + strings.Repeat("<&>", 100)), nil
		case <-ctx.Done():
			return mcp.NewToolResultError("cancelled"), nil
		}
	})
	inR, inW := io.Pipe()
	out := &lockedBuffer{}
	served := make(chan error, 1)
	go func() {
		served <- listenStdio(context.Background(), server.NewStdioServer(srv), srv, inR, out, func(ctx context.Context) context.Context { return ctx })
	}()
	send := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	const calls = maxDirectCalls + 8
	for i := 1; i <= calls; i++ {
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"wait","arguments":{}}}`, i))
	}
	send(`{"jsonrpc":"2.0","id":999,"method":"tools/call" this is not JSON`)
	deadline := time.Now().Add(10 * time.Second)
	for running.Load() < maxDirectCalls+5 && time.Now().Before(deadline) { // mcp-go's five workers take the rest
		time.Sleep(time.Millisecond)
	}
	if n := running.Load(); n < maxDirectCalls+5 {
		t.Fatalf("%d calls ran at once; %d served beside mcp-go and its five workers should", n, maxDirectCalls)
	}
	close(release)
	answered := map[float64]bool{}
	parseError := false
	for time.Now().Before(deadline) && (len(answered) < calls || !parseError) {
		answered, parseError = map[float64]bool{}, false
		for _, line := range out.lines() {
			var msg struct {
				ID     any `json:"id"`
				Result *struct {
					Content []struct{ Text string } `json:"content"`
				} `json:"result"`
				Error *struct{ Code int } `json:"error"`
			}
			if err := json.Unmarshal([]byte(line), &msg); err != nil {
				t.Fatalf("a line that is not one whole message: %q", line)
			}
			if id, ok := msg.ID.(float64); ok && id >= 1 && msg.Result != nil && len(msg.Result.Content) == 1 &&
				strings.HasPrefix(msg.Result.Content[0].Text, "done <&>") {
				answered[id] = true
			}
			parseError = parseError || (msg.Error != nil && msg.Error.Code == mcp.PARSE_ERROR)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(answered) != calls || !parseError {
		t.Fatalf("%d of %d calls answered, parse error %v:\n%s", len(answered), calls, parseError, strings.Join(out.lines(), "\n"))
	}
	// A call still running when the input ends is cancelled, and the
	// server returns once it has ended.
	release = make(chan struct{})
	send(`{"jsonrpc":"2.0","id":1000,"method":"tools/call","params":{"name":"wait","arguments":{}}}`)
	for running.Load() < calls+1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	inW.Close()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not return after its input ended")
	}
}
