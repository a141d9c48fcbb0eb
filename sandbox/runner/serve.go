// Package runner is the program inside every jail: it serves the server's
// requests on the jail's one connection (sandbox/runner/proto), doing the
// work on the workspace as the jail's own user, inside its mounts, so that
// nothing the server does follows a path the jail controls.
//
// It links only the standard library and golang.org/x/sys: it runs once
// per live jail, and its memory is paid per session (cmd/warren-runner).
package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// Call is one request as a handler sees it.
type Call struct {
	// Ctx ends when the server cancels the stream or the connection ends.
	Ctx context.Context
	// Args are the operation's arguments, in JSON: decode them with
	// DecodeArgs.
	Args json.RawMessage
	// In reads the request's input: the Open frame's body, then Data
	// frames until the server marks the last.
	In io.Reader
	// Out sends Data frames back, waiting for credit when the server has
	// not consumed what came before.
	Out io.Writer

	st       *stream
	srv      *Server
	afterEnd func()
}

// KeepOutput makes a Cancel interrupt the work (Ctx ends) without ending
// its output: what the handler writes after it still reaches the server,
// which reads the stream to its End (shell.exec: an interrupted command's
// last words and its result).
func (c *Call) KeepOutput() {
	c.st.mu.Lock()
	c.st.keep = true
	c.st.mu.Unlock()
}

// AfterEnd sets f to run once the stream's End has been sent.
func (c *Call) AfterEnd(f func()) { c.afterEnd = f }

// Flush sends what Out has gathered now, instead of when 64 KiB have
// gathered or the call ends: output someone watches as it comes.
func (c *Call) Flush() error { return c.st.flushOut() }

// DecodeArgs decodes the call's arguments into v, refusing unknown fields.
func (c *Call) DecodeArgs(v any) error {
	if len(c.Args) == 0 {
		return nil
	}
	d := json.NewDecoder(bytesReader(c.Args))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return proto.Errorf(proto.CodeInvalid, "bad arguments: %v", err)
	}
	return nil
}

// Handler does one operation: it returns the result (encoded as JSON in
// the stream's End) or an error (a *proto.Error keeps its code; any other
// becomes internal).
type Handler func(c *Call) (any, error)

// Server serves one connection.
type Server struct {
	ops map[string]Handler

	wmu sync.Mutex // one frame at a time on the wire
	raw io.Writer  // the connection
	w   *bufio.Writer
	buf []byte

	mu      sync.Mutex
	streams map[uint32]*stream
	conn    io.Closer   // the connection, when it can be closed
	ended   bool        // the server closed the connection itself (endConn)
	shell   *shellState // the connection's shell, once a command started it

	// Requests run on workers that wait for the next one when done (at
	// most maxIdleWorkers of them): a request's goroutine grows its stack
	// while it decodes and works, and a fresh goroutine per request paid
	// that copy every time (a tenth of the runner's time per file read).
	next    chan request  // to a waiting worker (unbuffered)
	waiting atomic.Int32  // workers waiting on next
	quit    chan struct{} // closed when Serve returns: waiting workers end
}

// request is an Open the reader hands to a worker.
type request struct {
	st  *stream
	req proto.Request
}

// maxIdleWorkers bounds the workers that wait for requests: one serves a
// session's calls one after another, a second a read beside a command.
const maxIdleWorkers = 2

// NewServer returns a server of ops.
func NewServer(ops map[string]Handler) *Server {
	return &Server{ops: ops, streams: map[uint32]*stream{}, next: make(chan request), quit: make(chan struct{})}
}

// Serve says hello on conn and serves it until it ends; it returns nil
// when the server closed it.
func (s *Server) Serve(conn io.ReadWriter) error {
	s.raw, s.w = conn, bufio.NewWriterSize(conn, 64<<10)
	if c, ok := conn.(io.Closer); ok {
		s.mu.Lock()
		s.conn = c
		s.mu.Unlock()
	}
	// The shell lives as long as its connection: a server that hung up
	// (or reconnects, or another replica that takes the session over)
	// never finds a shell it did not start.
	defer s.endShell()
	defer close(s.quit)
	names := make([]string, 0, len(s.ops))
	for n := range s.ops {
		names = append(names, n)
	}
	sort.Strings(names)
	hello, _ := json.Marshal(proto.HelloMsg{Protocol: proto.Version, Ops: names})
	if err := s.send(proto.Frame{Kind: proto.Hello, Head: hello}); err != nil {
		return err
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	defer s.endAll()
	for {
		f, err := proto.ReadFrame(r)
		if err != nil {
			s.mu.Lock()
			ended := s.ended
			s.mu.Unlock()
			if errors.Is(err, io.EOF) || ended {
				return nil
			}
			return err
		}
		if err := s.dispatch(f); err != nil {
			return err
		}
	}
}

func (s *Server) dispatch(f proto.Frame) error {
	s.mu.Lock()
	st := s.streams[f.Stream]
	s.mu.Unlock()
	switch f.Kind {
	case proto.Open:
		if st != nil || f.Stream == 0 {
			return errors.New("runner protocol: a stream opened twice")
		}
		var req proto.Request
		if err := json.Unmarshal(f.Head, &req); err != nil {
			return errors.New("runner protocol: an unreadable request")
		}
		st = newStream(s, f.Stream)
		s.mu.Lock()
		s.streams[f.Stream] = st
		s.mu.Unlock()
		st.in.add(f.Body, f.Flags&proto.FlagLast != 0)
		s.start(request{st, req})
	case proto.Data:
		if st != nil {
			st.in.add(f.Body, f.Flags&proto.FlagLast != 0)
		}
	case proto.Cancel:
		if st != nil {
			st.cancel()
		}
	case proto.Credit:
		if st != nil && len(f.Body) == 4 {
			st.grant(int64(uint32(f.Body[0])<<24 | uint32(f.Body[1])<<16 | uint32(f.Body[2])<<8 | uint32(f.Body[3])))
		}
	default:
		return errors.New("runner protocol: a frame the server may not send")
	}
	return nil
}

// start runs r on a waiting worker, or on a new one when none waits.
func (s *Server) start(r request) {
	select {
	case s.next <- r:
	default:
		go s.work(r)
	}
}

// work runs r, then waits for more requests while at most maxIdleWorkers
// wait, until the connection ends.
func (s *Server) work(r request) {
	for {
		s.run(r.st, r.req)
		if s.waiting.Add(1) > maxIdleWorkers {
			s.waiting.Add(-1)
			return
		}
		select {
		case r = <-s.next:
			s.waiting.Add(-1)
		case <-s.quit:
			s.waiting.Add(-1)
			return
		}
	}
}

// run does one request and ends its stream.
func (s *Server) run(st *stream, req proto.Request) {
	call := &Call{Ctx: st.ctx, Args: req.Args, In: &st.in, Out: st, st: st, srv: s}
	defer func() {
		s.mu.Lock()
		delete(s.streams, st.id)
		s.mu.Unlock()
		st.end()
		if call.afterEnd != nil {
			call.afterEnd()
		}
	}()
	var reply proto.Reply
	h := s.ops[req.Op]
	var res any
	var err error
	var tail []byte
	if h == nil {
		err = proto.Errorf(proto.CodeInvalid, "this runner has no operation %q (protocol %d)", proto.Cut(req.Op, 64), proto.Version)
	} else {
		res, err = h(call)
	}
	if err == nil {
		tail, err = st.tail()
	}
	if err != nil {
		var pe *proto.Error
		if !errors.As(err, &pe) {
			pe = &proto.Error{Code: proto.CodeInternal, Message: err.Error()}
		}
		pe.Message = proto.Cut(pe.Message, proto.MaxMessage)
		reply.Error = pe
	} else if res != nil {
		reply.Result, err = json.Marshal(res)
		if err != nil {
			reply.Error = &proto.Error{Code: proto.CodeInternal, Message: "result: " + err.Error()}
		}
	}
	head := replyHead(reply)
	if len(head) > proto.MaxHead {
		head, _ = json.Marshal(proto.Reply{Error: &proto.Error{Code: proto.CodeInternal, Message: "the result is over the protocol's limit"}})
	}
	if reply.Error != nil {
		tail = nil
	}
	_ = s.send(proto.Frame{Kind: proto.End, Stream: st.id, Head: head, Body: tail})
}

// replyHead encodes reply. A result, encoded by json.Marshal already, is
// put in as it is rather than checked and copied again as json.Marshal
// does a RawMessage; the bytes are the same.
func replyHead(reply proto.Reply) []byte {
	if reply.Error != nil || len(reply.Result) == 0 {
		head, _ := json.Marshal(reply)
		return head
	}
	head := make([]byte, 0, len(`{"result":}`)+len(reply.Result))
	head = append(head, `{"result":`...)
	head = append(head, reply.Result...)
	return append(head, '}')
}

// send writes one frame and flushes it.
func (s *Server) send(f proto.Frame) error { return s.write(f, true) }

// write writes one frame, and flushes it unless another follows at once
// (a stream's last output before its End: one write to the socket, one
// wake-up of the server, for both).
func (s *Server) write(f proto.Frame, flush bool) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var err error
	s.buf, err = proto.AppendFrame(s.buf[:0], f)
	if err != nil {
		return err
	}
	if flush && s.w.Buffered() == 0 {
		// Nothing gathered before it: one write, without copying the
		// frame into the buffer first.
		_, err = s.raw.Write(s.buf)
		return err
	}
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	if !flush {
		return nil
	}
	return s.w.Flush()
}

// endAll cancels every stream once the connection is gone.
func (s *Server) endAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.streams {
		st.end()
		st.in.add(nil, true)
	}
}

// endConn closes the connection from the runner's side (its shell has
// ended: the jail's runner exits, a runner on a network hangs up on this
// server only).
func (s *Server) endConn() {
	s.mu.Lock()
	c := s.conn
	s.ended = true
	s.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// shellState returns the connection's shell state, made on first use.
func (s *Server) shellState() *shellState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shell == nil {
		s.shell = newShellState(s.endConn)
	}
	return s.shell
}

// endShell kills the connection's shell and what its commands left
// running, once the connection is gone.
func (s *Server) endShell() {
	s.mu.Lock()
	sh := s.shell
	s.mu.Unlock()
	if sh != nil {
		sh.end()
	}
}

// ServeFDs serves the connection on two pipes (a jail's runner): it reads
// requests from in and writes frames to out. Only in waits in Go's
// poller; out stays blocking, so that the server's reads never wake this
// process (docs/runner-protocol.md, "Why two pipes").
func (s *Server) ServeFDs(in, out int) error {
	_ = syscall.SetNonblock(in, true)
	_ = syscall.SetNonblock(out, false)
	r, w := os.NewFile(uintptr(in), "runner-in"), os.NewFile(uintptr(out), "runner-out")
	if r == nil || w == nil {
		return errors.New("runner: no connection on descriptors")
	}
	c := &Pipes{R: r, W: w}
	defer c.Close()
	return s.Serve(c)
}

// Pipes is a connection of two pipes: one read, the other written. Both
// ends of a jail's runner connection are one.
type Pipes struct{ R, W *os.File }

func (c *Pipes) Read(p []byte) (int, error)  { return c.R.Read(p) }
func (c *Pipes) Write(p []byte) (int, error) { return c.W.Write(p) }

// Close closes both pipes: the peer reads the end of its input, and a read
// waiting here returns.
func (c *Pipes) Close() error {
	werr := c.W.Close()
	if err := c.R.Close(); err != nil {
		return err
	}
	return werr
}
