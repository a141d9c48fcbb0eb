package mcp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/warrenhq/warren/sessions"
)

// notifier sends progress notifications and, over stdio, makes sure they
// are on the wire before the call's response.
//
// mcp-go drops a notification when the session's channel (100 slots) is
// full, and over stdio one goroutine writes notifications while another
// writes responses, so a response can overtake the notifications sent
// before it. We coalesce output into at most one notification per tick,
// retry a dropped one, and, over stdio, count the progress notifications
// written to stdout so that a handler can wait until its own are out.
type notifier struct {
	srv *server.MCPServer

	// mu protects the counters; cond signals writes.
	mu      sync.Mutex
	cond    *sync.Cond
	sent    uint64 // progress notifications accepted by mcp-go
	written uint64 // progress notifications written to stdout
	track   bool   // stdio: written is maintained
}

func newNotifier() *notifier {
	n := &notifier{}
	n.cond = sync.NewCond(&n.mu)
	return n
}

// send hands one progress notification to mcp-go and returns its sequence
// number, or 0 when it was dropped.
func (n *notifier) send(ctx context.Context, token mcp.ProgressToken, progress int64, message string) uint64 {
	if n.srv == nil {
		return 0
	}
	// Take the lock across the send so that sequence numbers follow the
	// channel's order.
	n.mu.Lock()
	defer n.mu.Unlock()
	err := n.srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
		"progressToken": token,
		"progress":      progress,
		"message":       message,
	})
	if err != nil {
		return 0
	}
	n.sent++
	return n.sent
}

// waitWritten blocks until notification seq is on stdout, or d passes.
func (n *notifier) waitWritten(seq uint64, d time.Duration) {
	if seq == 0 || !n.track {
		return
	}
	deadline := time.Now().Add(d)
	t := time.AfterFunc(d, func() { n.mu.Lock(); n.cond.Broadcast(); n.mu.Unlock() })
	defer t.Stop()
	n.mu.Lock()
	defer n.mu.Unlock()
	for n.written < seq && time.Now().Before(deadline) {
		n.cond.Wait()
	}
}

// progressMarker identifies a progress notification line on stdout.
var progressMarker = []byte(`"method":"notifications/progress"`)

// countingWriter is stdout for the stdio transport: it counts progress
// notifications once they are written. mcp-go writes each message with a
// single Write call.
type countingWriter struct {
	mu sync.Mutex // one message at a time: mcp-go's writes, and stdioCalls'
	w  io.Writer
	n  *notifier
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	k, err := c.w.Write(p)
	c.mu.Unlock()
	if bytes.Contains(p, progressMarker) {
		c.n.mu.Lock()
		c.n.written++
		c.n.cond.Broadcast()
		c.n.mu.Unlock()
	}
	return k, err
}

// tick is how often buffered output becomes a progress notification.
const tick = 20 * time.Millisecond

// maxNote caps one notification's message; the rest waits for the next.
const maxNote = 16 << 10

// maxPending bounds the output waiting to be streamed. A command can write
// faster than a client reads: past this, the command waits for the stream
// (its pipe fills, and it blocks), so a slow client still gets every byte
// and the server holds at most this much. A client that stops reading for
// longer than lagWait gets the rest skipped, with the skip said in the
// stream, until it catches up: the result keeps the head and tail anyway.
const maxPending = 1 << 20

// lagWait is how long output waits for a full stream to drain.
const lagWait = 2 * time.Second

// progress streams one call's output as progress notifications.
type progress struct {
	n     *notifier
	ctx   context.Context
	token mcp.ProgressToken

	// mu protects the fields below.
	mu      sync.Mutex
	pending []byte
	skipped int64 // output not queued because pending was full
	lagging bool  // the client did not drain a full stream in lagWait
	drained chan struct{}
	total   int64 // bytes sent or skipped so far: the progress value, always growing
	last    uint64
	stop    chan struct{}
	stopped chan struct{}
}

// newProgress returns nil when the request carries no progress token.
func newProgress(ctx context.Context, n *notifier, req mcp.CallToolRequest) *progress {
	if n == nil || req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
		return nil
	}
	p := &progress{n: n, ctx: ctx, token: req.Params.Meta.ProgressToken,
		stop: make(chan struct{}), stopped: make(chan struct{}), drained: make(chan struct{}, 1)}
	go p.loop()
	return p
}

// add queues a chunk of output. A chunk that comes after finish (the
// call returned; the output stays with the job for its result) is not
// streamed.
// output is add for a command's output of either stream.
func (p *progress) output(_ sessions.Stream, chunk []byte) { p.add(chunk) }

func (p *progress) add(chunk []byte) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.pending)+len(chunk) > maxPending {
		if p.lagging {
			p.skipped += int64(len(chunk))
			return
		}
		p.mu.Unlock()
		t := time.NewTimer(lagWait)
		select {
		case <-p.drained:
		case <-p.stop:
			t.Stop()
			p.mu.Lock()
			return
		case <-t.C:
			p.mu.Lock()
			p.lagging = true
			t.Stop()
			continue
		}
		t.Stop()
		p.mu.Lock()
	}
	p.pending = append(p.pending, chunk...)
}

func (p *progress) loop() {
	defer close(p.stopped)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			p.flush()
		case <-p.stop:
			return
		}
	}
}

// flush sends what is pending; false when a notification was dropped and
// output is left.
func (p *progress) flush() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.pending) > 0 {
		k := min(len(p.pending), maxNote)
		seq := p.n.send(p.ctx, p.token, p.total+int64(k), text(p.pending[:k]))
		if seq == 0 {
			return false
		}
		p.last = seq
		p.total += int64(k)
		p.pending = p.pending[k:]
	}
	if p.skipped > 0 {
		note := fmt.Sprintf("\n[warren: %d bytes of output were not streamed, because the client reads slower than the command writes; the result keeps the output's head and tail]\n", p.skipped)
		seq := p.n.send(p.ctx, p.token, p.total+p.skipped, note)
		if seq == 0 {
			return false
		}
		p.last = seq
		p.total += p.skipped
		p.skipped = 0
	}
	p.pending = nil // sent: let the burst's buffer go
	p.lagging = false
	select {
	case p.drained <- struct{}{}:
	default:
	}
	return true
}

// finish sends the rest and waits until it is on the wire, so that the
// client sees every progress notification before the result.
func (p *progress) finish() {
	if p == nil {
		return
	}
	close(p.stop)
	<-p.stopped
	for i := 0; i < 100 && !p.flush(); i++ {
		time.Sleep(tick)
	}
	p.mu.Lock()
	last := p.last
	p.mu.Unlock()
	p.n.waitWritten(last, 2*time.Second)
}
