package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// stdioCalls serves the tools/call requests of a stdio client itself,
// beside mcp-go's stdio server, which serves every other line. mcp-go's
// server decodes each line five times before it queues a tool call (as a
// response to the server's sampling, elicitation and roots requests, then
// as a request), and encodes the result twice over: json.Marshal checks
// and copies again, byte by byte, the JSON the result's own MarshalJSON
// made, which for read_file's 4 KB is most of the cost of its response.
// Here a line is decoded once to see that it is a tool call, handed to
// the same MCPServer.HandleMessage (so validation, middlewares,
// cancellation by notifications/cancelled and the 2026-07-28 envelope are
// mcp-go's, unchanged), and its response is written as mcp-go writes it,
// byte for byte, without the second pass.
type stdioCalls struct {
	srv *server.MCPServer
	out io.Writer // the stdio writer, whose Write is one whole message

	mu     sync.Mutex
	ctx    context.Context // the stdio session's, once mcp-go made it
	cancel context.CancelFunc
	closed bool           // end was called: no call starts here any more
	slots  chan struct{}  // bounds the calls in flight here
	wg     sync.WaitGroup // the workers; Add only under mu, before closed

	// Calls run on workers that wait for the next one when done (at most
	// maxIdleCallers of them), as mcp-go's do: a call's goroutine grows
	// its stack through the middlewares, and a fresh one per call would
	// copy it as it grows, every time.
	next    chan []byte  // to a waiting worker (unbuffered)
	waiting atomic.Int32 // workers waiting on next
}

// maxIdleCallers bounds the workers that wait for the next tool call.
const maxIdleCallers = 4

// listenStdio serves srv to one client on in and w, as std (mcp-go's
// stdio server of srv) does, with its tool calls served beside it. w must
// write each message whole, one Write at a time (countingWriter).
func listenStdio(ctx context.Context, std *server.StdioServer, srv *server.MCPServer, in io.Reader, w io.Writer,
	contextFunc func(context.Context) context.Context) error {
	calls := newStdioCalls(srv, w)
	std.SetContextFunc(func(ctx context.Context) context.Context { return calls.session(contextFunc(ctx)) })
	compat := newStdioCompat(in)
	compat.calls = calls
	err := std.Listen(ctx, compat, w)
	calls.end()
	return err
}

// maxDirectCalls bounds the tool calls served here at once; more wait in
// mcp-go's own queue (its five workers), as before.
const maxDirectCalls = 32

func newStdioCalls(srv *server.MCPServer, out io.Writer) *stdioCalls {
	return &stdioCalls{srv: srv, out: out, slots: make(chan struct{}, maxDirectCalls), next: make(chan []byte)}
}

// session takes the context mcp-go made for the stdio session (its
// session, and the user: SetContextFunc), before it reads a line.
func (c *stdioCalls) session(ctx context.Context) context.Context {
	c.mu.Lock()
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.mu.Unlock()
	return ctx
}

// take serves line when it is a tool call and a slot is free, and reports
// whether it did; any other line is mcp-go's.
func (c *stdioCalls) take(line []byte) bool {
	c.mu.Lock()
	ctx, closed := c.ctx, c.closed
	c.mu.Unlock()
	if ctx == nil || closed || !bytes.Contains(line, []byte(`"tools/call"`)) {
		return false
	}
	var head struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &head) != nil || head.Method != string(mcp.MethodToolsCall) || len(head.ID) == 0 || string(head.ID) == "null" {
		return false // not a tool call request: mcp-go answers it, or says what is wrong
	}
	select {
	case c.slots <- struct{}{}:
	default:
		return false
	}
	msg := bytes.Clone(line) // the reader's buffer is reused
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed { // end came meanwhile: mcp-go answers (or cancels) it
		<-c.slots
		return false
	}
	select {
	case c.next <- msg:
	default:
		c.wg.Add(1)
		go c.work(ctx, msg)
	}
	return true
}

// work serves msg, then the calls handed to it while at most
// maxIdleCallers wait, until the session ends.
func (c *stdioCalls) work(ctx context.Context, msg []byte) {
	defer c.wg.Done()
	for {
		c.serve(ctx, msg)
		<-c.slots
		if c.waiting.Add(1) > maxIdleCallers {
			c.waiting.Add(-1)
			return
		}
		select {
		case msg = <-c.next:
			c.waiting.Add(-1)
		case <-ctx.Done():
			c.waiting.Add(-1)
			return
		}
	}
}

func (c *stdioCalls) serve(ctx context.Context, msg []byte) {
	var resp mcp.JSONRPCMessage
	func() {
		defer func() {
			if r := recover(); r != nil {
				var id mcp.RequestId
				var head struct {
					ID *mcp.RequestId `json:"id"`
				}
				if json.Unmarshal(msg, &head) == nil && head.ID != nil {
					id = *head.ID
				}
				resp = mcp.NewJSONRPCError(id, mcp.INTERNAL_ERROR, fmt.Sprintf("internal panic: %v", r), nil)
			}
		}()
		resp = c.srv.HandleMessage(ctx, msg)
	}()
	if resp == nil {
		return
	}
	b, err := encodeResponse(resp)
	if err != nil {
		return
	}
	_, _ = c.out.Write(append(b, '\n'))
}

// end cancels the calls in flight (the client closed its input, as mcp-go
// does for its own) and waits for them, so that none outlives the session.
func (c *stdioCalls) end() {
	c.mu.Lock()
	c.closed = true
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	c.wg.Wait()
}

// encodeResponse encodes resp as json.Marshal does. A tool's result is put
// in as its MarshalJSON made it: compact and HTML-escaped already, which
// is what json.Marshal would check and copy it to.
func encodeResponse(resp mcp.JSONRPCMessage) ([]byte, error) {
	r, ok := resp.(mcp.JSONRPCResponse)
	if !ok {
		return json.Marshal(resp)
	}
	var result []byte
	var err error
	switch res := r.Result.(type) {
	case *mcp.CallToolResult:
		if res == nil {
			return json.Marshal(resp)
		}
		result, err = res.MarshalJSON()
	case mcp.CallToolResult:
		result, err = res.MarshalJSON()
	default:
		return json.Marshal(resp)
	}
	if err != nil {
		return nil, err
	}
	id, err := r.ID.MarshalJSON()
	if err != nil {
		return nil, err
	}
	jsonrpc, err := json.Marshal(r.JSONRPC)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(`{"jsonrpc":,"id":,"result":}`)+len(jsonrpc)+len(id)+len(result))
	b = append(b, `{"jsonrpc":`...)
	b = append(b, jsonrpc...)
	b = append(b, `,"id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}'), nil
}
