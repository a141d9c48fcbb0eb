// Package client is the server's side of the connection to a runner
// (sandbox/runner/proto). Everything the runner says is untrusted: frames
// are bounded by proto, replies are decoded into the caller's structs and
// checked, error codes outside warren's vocabulary become internal, and
// messages are cut before anyone keeps them.
package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/warrenhq/warren/sandbox/runner/proto"
	"github.com/warrenhq/warren/sessions/errs"
)

// ErrGone is what calls fail with once the runner's connection has ended
// (the jail stopped, or something in it killed the runner).
var ErrGone = errs.New(errs.Unavailable, "the session's runner has ended (its jail stopped, or a command killed it); the next command starts it again")

// Conn is one connection to a runner. Its methods are safe for concurrent
// use; each call is a stream of its own, so a read never waits behind a
// running command.
type Conn struct {
	rwc io.ReadWriteCloser

	wmu sync.Mutex
	buf []byte

	hello   chan struct{} // closed once the hello came (or the connection ended)
	helloOK proto.HelloMsg

	mu      sync.Mutex
	next    uint32
	streams map[uint32]*Stream
	err     error // why the connection ended
	done    chan struct{}
}

// New starts reading rwc; the runner's hello is awaited by the first call.
func New(rwc io.ReadWriteCloser) *Conn {
	c := &Conn{rwc: rwc, hello: make(chan struct{}),
		next: 1, streams: map[uint32]*Stream{}, done: make(chan struct{})}
	go c.readLoop()
	return c
}

// Close ends the connection; calls in flight fail with ErrGone.
func (c *Conn) Close() error {
	err := c.rwc.Close()
	<-c.done
	return err
}

// Done is closed once the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Hello waits for the runner's hello and returns it; it fails when the
// runner speaks another protocol or the connection ends first.
func (c *Conn) Hello(ctx context.Context) (proto.HelloMsg, error) {
	select {
	case <-c.hello:
	case <-ctx.Done():
		return proto.HelloMsg{}, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.helloOK.Protocol == 0 {
		return proto.HelloMsg{}, c.goneErr()
	}
	return c.helloOK, nil
}

// Has reports whether the runner serves op (after Hello).
func (c *Conn) Has(op string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.helloOK.Ops, op)
}

func (c *Conn) goneErr() error {
	if c.err != nil && !errors.Is(c.err, io.EOF) && !errors.Is(c.err, ErrGone) {
		return fmt.Errorf("%w (%s)", ErrGone, proto.Cut(c.err.Error(), 200))
	}
	return ErrGone
}

func (c *Conn) readLoop() {
	r := bufio.NewReaderSize(c.rwc, 64<<10)
	var err error
	for {
		var f proto.Frame
		f, err = proto.ReadFrameBuf(r, frameBuf)
		if err != nil {
			break
		}
		if err = c.dispatch(f); err != nil {
			break
		}
	}
	c.rwc.Close()
	c.mu.Lock()
	c.err = err
	streams := c.streams
	c.streams = map[uint32]*Stream{}
	select {
	case <-c.hello:
	default:
		close(c.hello)
	}
	c.mu.Unlock()
	for _, st := range streams {
		st.fail(c.goneErrLocked())
	}
	close(c.done)
}

func (c *Conn) goneErrLocked() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.goneErr()
}

// dispatch hands a frame to its stream. A frame the runner may not send
// ends the connection: a runner that breaks the protocol is not believed
// again.
func (c *Conn) dispatch(f proto.Frame) error {
	if f.Kind == proto.Hello {
		var h proto.HelloMsg
		if f.Stream != 0 || json.Unmarshal(f.Head, &h) != nil || h.Protocol != proto.Version || len(h.Ops) > 256 {
			return fmt.Errorf("%w: a hello of protocol %d (this server speaks %d)", proto.ErrFrame, h.Protocol, proto.Version)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		select {
		case <-c.hello:
			return fmt.Errorf("%w: a second hello", proto.ErrFrame)
		default:
		}
		for i, op := range h.Ops {
			h.Ops[i] = proto.Cut(op, 64)
		}
		c.helloOK = h
		close(c.hello)
		return nil
	}
	c.mu.Lock()
	st := c.streams[f.Stream]
	if f.Kind == proto.End {
		delete(c.streams, f.Stream)
	}
	c.mu.Unlock()
	if st == nil {
		if f.Kind == proto.Data || f.Kind == proto.End {
			return nil // a stream the server has given up on (cancelled)
		}
		return fmt.Errorf("%w: kind %d from the runner", proto.ErrFrame, f.Kind)
	}
	switch f.Kind {
	case proto.Data:
		return st.push(f.Body)
	case proto.End:
		// The head is decoded first: the body, pushed below, shares its
		// buffer, which the stream's reader recycles once done with it.
		var rep proto.Reply
		if err := json.Unmarshal(f.Head, &rep); err != nil {
			st.fail(errs.New(errs.Internal, "the runner sent an unreadable reply"))
			return nil
		}
		// An End may carry the operation's last output in its body.
		if len(f.Body) > 0 {
			if err := st.push(f.Body); err != nil {
				return err
			}
		}
		st.end(rep)
		return nil
	}
	return fmt.Errorf("%w: kind %d from the runner", proto.ErrFrame, f.Kind)
}

// send writes one frame.
func (c *Conn) send(f proto.Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var err error
	c.buf, err = proto.AppendFrame(c.buf[:0], f)
	if err != nil {
		return err
	}
	// One write of the whole frame: a buffered writer would only copy it
	// once more before the same write.
	_, err = c.rwc.Write(c.buf)
	return err
}

// Open starts op with args (marshalled to JSON) and in as its whole input.
// The caller reads the stream's output and then its reply, or closes it.
func (c *Conn) Open(ctx context.Context, op string, args any, in []byte) (*Stream, error) {
	if _, err := c.Hello(ctx); err != nil {
		return nil, err
	}
	head, err := requestHead(op, args)
	if err != nil {
		return nil, err
	}
	if len(head) > proto.MaxHead {
		return nil, errs.New(errs.Invalid, "the request is over the runner protocol's limit of 64 KiB")
	}
	st := &Stream{c: c, ended: make(chan struct{})}
	st.cond = sync.NewCond(&st.mu)
	c.mu.Lock()
	if c.err != nil || isClosed(c.done) {
		c.mu.Unlock()
		return nil, c.goneErrLocked()
	}
	st.id = c.next
	c.next += 2 // odd ids: the server's
	c.streams[st.id] = st
	c.mu.Unlock()
	first := in
	if len(first) > proto.MaxBody {
		first = first[:proto.MaxBody]
	}
	rest := in[len(first):]
	flags := proto.FlagLast
	if len(rest) > 0 {
		flags = 0
	}
	if err := c.send(proto.Frame{Kind: proto.Open, Flags: flags, Stream: st.id, Head: head, Body: first}); err != nil {
		st.Close()
		return nil, fmt.Errorf("%w (%v)", ErrGone, err)
	}
	for len(rest) > 0 {
		n := min(len(rest), proto.MaxBody)
		flags = 0
		if n == len(rest) {
			flags = proto.FlagLast
		}
		if err := c.send(proto.Frame{Kind: proto.Data, Flags: flags, Stream: st.id, Body: rest[:n]}); err != nil {
			st.Close()
			return nil, fmt.Errorf("%w (%v)", ErrGone, err)
		}
		rest = rest[n:]
	}
	st.stop = context.AfterFunc(ctx, func() { st.cancel() })
	return st, nil
}

// Call does op and decodes its result into result (nil to ignore it). Any
// output the operation streams is read and dropped: operations with
// output are read through Open.
func (c *Conn) Call(ctx context.Context, op string, args any, in []byte, result any) error {
	st, err := c.Open(ctx, op, args, in)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := io.Copy(io.Discard, st); err != nil {
		return err
	}
	return st.Result(result)
}

// requestHead encodes a Request for op with args. An op of plain letters,
// digits, dots and underscores (every op warren has) needs no escaping, so
// the arguments are encoded once, into the head, instead of once and then
// checked and copied again as a RawMessage.
func requestHead(op string, args any) ([]byte, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	if !plainOp(op) {
		return json.Marshal(proto.Request{Op: op, Args: raw})
	}
	head := make([]byte, 0, len(`{"op":"","args":}`)+len(op)+len(raw))
	head = append(head, `{"op":"`...)
	head = append(head, op...)
	head = append(head, `","args":`...)
	head = append(head, raw...)
	return append(head, '}'), nil
}

func plainOp(op string) bool {
	for i := 0; i < len(op); i++ {
		c := op[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_') {
			return false
		}
	}
	return op != ""
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// credit encodes a Credit frame's body.
func credit(n int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

// DialTLS connects to a runner that listens on a network (warren-runner
// --listen: a runner in a pod) with mutual TLS, cfg naming the server's
// certificate and the runner's expected one.
func DialTLS(ctx context.Context, addr string, cfg *tls.Config) (*Conn, error) {
	d := tls.Dialer{Config: cfg}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "cannot reach the runner at "+addr+": "+err.Error())
	}
	return New(c), nil
}
