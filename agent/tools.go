package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/warrenhq/warren/agent/provider"
)

// ToolInfo is one MCP tool as the agent sees it.
type ToolInfo struct {
	Name        string
	Description string
	Toolset     string
	Schema      json.RawMessage
	ReadOnly    bool
	Destructive bool
	// HasSession: the tool takes a session_id, which the agent pins to
	// its own session.
	HasSession bool
}

// Tools is an MCP client connected to a warren server: in-process or over
// streamable HTTP. The agent reaches the jail only through it.
type Tools struct {
	c     *client.Client
	ctxFn func(context.Context) context.Context

	// mu protects progress.
	mu       sync.Mutex
	progress map[string]*progressSink
	next     atomic.Int64
}

// progressSink is where one running call's live output goes. The MCP
// client hands notifications to onNotification on goroutines of its own,
// so a line sent just before the result may still be on its way when the
// call returns: the call waits for deliveries under way (running) and
// takes its sink out, so that nothing of its output arrives after it (an
// agent's progress event after its run's end).
type progressSink struct {
	fn      func(string)
	running sync.WaitGroup
}

// ConnectInProcess connects to srv in this process. withUser puts the
// calling user into each request's context, as a transport would.
func ConnectInProcess(ctx context.Context, srv *server.MCPServer, withUser func(context.Context) context.Context, clientName string) (*Tools, error) {
	c, err := client.NewInProcessClient(srv)
	if err != nil {
		return nil, fmt.Errorf("connect in-process: %w", err)
	}
	return start(ctx, c, withUser, clientName)
}

// ConnectHTTP connects to a remote `warren serve http` at url with a
// bearer token.
func ConnectHTTP(ctx context.Context, url, token, clientName string) (*Tools, error) {
	headers := map[string]string{}
	if token != "" {
		headers["Authorization"] = "Bearer " + token
	}
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(headers))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	return start(ctx, c, nil, clientName)
}

func start(ctx context.Context, c *client.Client, ctxFn func(context.Context) context.Context, name string) (*Tools, error) {
	if ctxFn == nil {
		ctxFn = func(ctx context.Context) context.Context { return ctx }
	}
	t := &Tools{c: c, ctxFn: ctxFn, progress: map[string]*progressSink{}}
	c.OnNotification(t.onNotification)
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("start MCP client: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: name, Version: "1"}
	if _, err := c.Initialize(ctxFn(ctx), init); err != nil {
		c.Close()
		return nil, fmt.Errorf("initialize MCP session: %w", err)
	}
	return t, nil
}

// Close ends the MCP session.
func (t *Tools) Close() error { return t.c.Close() }

func (t *Tools) onNotification(n mcp.JSONRPCNotification) {
	if n.Method != "notifications/progress" {
		return
	}
	fields := n.Params.AdditionalFields
	tok := fmt.Sprint(fields["progressToken"])
	msg, _ := fields["message"].(string)
	if msg == "" {
		return
	}
	t.mu.Lock()
	sink := t.progress[tok]
	if sink != nil {
		sink.running.Add(1) // under mu: the call has not taken its sink out
	}
	t.mu.Unlock()
	if sink != nil {
		defer sink.running.Done()
		sink.fn(msg)
	}
}

// List returns the server's tools.
func (t *Tools) List(ctx context.Context) ([]ToolInfo, error) {
	res, err := t.c.ListTools(t.ctxFn(ctx), mcp.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	var out []ToolInfo
	for _, tool := range res.Tools {
		schema, err := json.Marshal(tool.InputSchema)
		if tool.RawInputSchema != nil {
			schema, err = tool.RawInputSchema, nil
		}
		if err != nil {
			return nil, fmt.Errorf("tool %s schema: %w", tool.Name, err)
		}
		info := ToolInfo{Name: tool.Name, Description: tool.Description, Toolset: toolsetOf(tool.Name), Schema: schema,
			ReadOnly: tool.Annotations.ReadOnlyHint != nil && *tool.Annotations.ReadOnlyHint,
			// MCP's default for destructiveHint is true.
			Destructive: tool.Annotations.DestructiveHint == nil || *tool.Annotations.DestructiveHint}
		_, info.HasSession = tool.InputSchema.Properties["session_id"]
		if info.ReadOnly {
			info.Destructive = false
		}
		out = append(out, info)
	}
	return out, nil
}

// Call runs one tool and returns its result flattened to text (tool
// messages are always strings). Output of a running command goes to
// onProgress.
func (t *Tools) Call(ctx context.Context, name string, args map[string]any, onProgress func(string)) (string, bool, error) {
	text, isErr, _, err := t.CallImages(ctx, name, args, onProgress)
	return text, isErr, err
}

// CallImages is Call that also returns the images of the result (read_file
// of a picture); the text names each of them.
func (t *Tools) CallImages(ctx context.Context, name string, args map[string]any, onProgress func(string)) (string, bool, []provider.Image, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	if onProgress != nil {
		tok := "agent-" + strconv.FormatInt(t.next.Add(1), 10)
		sink := &progressSink{fn: onProgress}
		t.mu.Lock()
		t.progress[tok] = sink
		t.mu.Unlock()
		defer func() {
			t.mu.Lock()
			delete(t.progress, tok)
			t.mu.Unlock()
			sink.running.Wait()
		}()
		req.Params.Meta = &mcp.Meta{ProgressToken: mcp.ProgressToken(tok)}
	}
	res, err := t.c.CallTool(t.ctxFn(ctx), req)
	if err != nil {
		return "", true, nil, err
	}
	text, images := flatten(res)
	return text, res.IsError, images, nil
}

// flatten turns MCP content into the one string a tool message carries,
// and the images, which a tool message cannot carry.
func flatten(res *mcp.CallToolResult) (string, []provider.Image) {
	var parts []string
	var images []provider.Image
	for _, c := range res.Content {
		switch v := c.(type) {
		case mcp.TextContent:
			parts = append(parts, v.Text)
		case mcp.ImageContent:
			images = append(images, provider.Image{MIMEType: v.MIMEType, Data: v.Data})
			parts = append(parts, fmt.Sprintf("[image %d: %s, %d bytes of base64]", len(images), v.MIMEType, len(v.Data)))
		case mcp.EmbeddedResource:
			if r, ok := v.Resource.(mcp.TextResourceContents); ok {
				parts = append(parts, r.Text)
			} else {
				parts = append(parts, "[binary resource omitted]")
			}
		default:
			b, _ := json.Marshal(c)
			parts = append(parts, string(b))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		parts = append(parts, string(b))
	}
	return strings.Join(parts, "\n"), images
}
