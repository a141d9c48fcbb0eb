package client

import (
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/warrenhq/warren/sandbox/runner/proto"
	"github.com/warrenhq/warren/sessions/errs"
)

// Stream is one operation in flight: its output as an io.Reader, then its
// reply.
type Stream struct {
	c     *Conn
	id    uint32
	stop  func() bool
	ended chan struct{} // closed with the reply (or a failure)

	mu       sync.Mutex
	cond     *sync.Cond
	chunks   [][]byte
	buffered int    // bytes in chunks: never more than the credit given
	last     []byte // the chunk Next returned last, recycled on the next call
	woken    bool   // Wake was called: a waiting Next returns ErrWoken
	reply    proto.Reply
	err      error
	done     bool
	closed   bool
}

// push queues output the runner sent. More than the credit given breaks
// the protocol.
func (st *Stream) push(b []byte) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil
	}
	st.buffered += len(b)
	if st.buffered > proto.InitialCredit {
		return errs.New(errs.Internal, "the runner sent more than its credit")
	}
	st.chunks = append(st.chunks, b)
	st.cond.Broadcast()
	return nil
}

func (st *Stream) end(rep proto.Reply) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done {
		return
	}
	st.reply, st.done = rep, true
	close(st.ended)
	st.cond.Broadcast()
}

func (st *Stream) fail(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done {
		return
	}
	st.err, st.done = err, true
	close(st.ended)
	st.cond.Broadcast()
}

// Read reads the operation's output; io.EOF once it has ended.
func (st *Stream) Read(p []byte) (int, error) {
	st.mu.Lock()
	for len(st.chunks) == 0 && !st.done {
		st.cond.Wait()
	}
	if len(st.chunks) == 0 {
		err := st.err
		st.mu.Unlock()
		if err != nil {
			return 0, err
		}
		return 0, io.EOF
	}
	n := copy(p, st.chunks[0])
	if n == len(st.chunks[0]) {
		recycle(st.chunks[0])
		st.chunks[0] = nil
		st.chunks = st.chunks[1:]
	} else {
		st.chunks[0] = st.chunks[0][n:]
	}
	st.buffered -= n
	done := st.done
	st.mu.Unlock()
	// Once the reply came the runner sends nothing more on the stream:
	// credit would only cost a write here and a wake-up there.
	if n > 0 && !done {
		_ = st.c.send(proto.Frame{Kind: proto.Credit, Stream: st.id, Body: credit(n)})
	}
	return n, nil
}

// ErrWoken is what a Next waiting for output returns after Wake.
var ErrWoken = errors.New("runner client: woken")

// Wake makes a Next that waits for output (now, or the next call that
// would wait) return ErrWoken: a reader that must stop waiting at a given
// time arms a timer with it instead of reading on another goroutine.
func (st *Stream) Wake() {
	st.mu.Lock()
	st.woken = true
	st.cond.Broadcast()
	st.mu.Unlock()
}

// Next returns the next piece of output as the runner sent it, without a
// copy: valid until the next call. It returns io.EOF once the operation
// has ended.
func (st *Stream) Next() ([]byte, error) {
	st.mu.Lock()
	if st.last != nil {
		recycle(st.last) // the caller is done with it
		st.last = nil
	}
	for len(st.chunks) == 0 && !st.done && !st.woken {
		st.cond.Wait()
	}
	if len(st.chunks) == 0 && !st.done {
		st.woken = false
		st.mu.Unlock()
		return nil, ErrWoken
	}
	if len(st.chunks) == 0 {
		err := st.err
		st.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	b := st.chunks[0]
	st.chunks[0] = nil
	st.chunks = st.chunks[1:]
	st.buffered -= len(b)
	st.last = b
	done := st.done
	st.mu.Unlock()
	if len(b) > 0 && !done {
		_ = st.c.send(proto.Frame{Kind: proto.Credit, Stream: st.id, Body: credit(len(b))})
	}
	return b, nil
}

// Result waits for the reply and decodes its result into v (nil to ignore
// it); the runner's error, with its code checked and its message cut, is
// returned as a sessions/errs error.
func (st *Stream) Result(v any) error {
	<-st.ended
	st.mu.Lock()
	rep, err := st.reply, st.err
	st.mu.Unlock()
	if err != nil {
		return err
	}
	if e := rep.Error; e != nil {
		code := errs.Code(e.Code)
		if !proto.KnownCode(e.Code) {
			code = errs.Internal
		}
		return errs.New(code, proto.Cut(e.Message, proto.MaxMessage))
	}
	if v == nil {
		return nil
	}
	if len(rep.Result) == 0 {
		return errs.New(errs.Internal, "the runner sent no result")
	}
	if err := json.Unmarshal(rep.Result, v); err != nil {
		return errs.New(errs.Internal, "the runner sent a result that does not fit: "+proto.Cut(err.Error(), 200))
	}
	return nil
}

// cancel asks the runner to stop the operation.
func (st *Stream) cancel() {
	select {
	case <-st.ended:
		return
	default:
	}
	_ = st.c.send(proto.Frame{Kind: proto.Cancel, Stream: st.id})
}

// Close gives the stream up: output not read is dropped and a running
// operation is cancelled.
func (st *Stream) Close() {
	if st.stop != nil {
		st.stop()
	}
	st.mu.Lock()
	st.closed = true
	st.chunks = nil
	done := st.done
	st.mu.Unlock()
	if !done {
		st.cancel()
		st.c.mu.Lock()
		delete(st.c.streams, st.id)
		st.c.mu.Unlock()
	}
}

// Output frames are read into pooled buffers: a command that prints
// hundreds of megabytes would otherwise leave one garbage buffer per frame
// for the collector. A chunk goes back once its reader is done with it.
const poolBuf = 136 << 10 // a frame of gathered output: 64 KiB and one more pipe read, with headers

var frames = sync.Pool{New: func() any { b := make([]byte, poolBuf); return &b }}

// frameBuf returns n bytes for a frame: pooled when it fits a pool
// buffer and is large enough to matter.
func frameBuf(n int) []byte {
	if n < 4<<10 || n > poolBuf {
		return make([]byte, n)
	}
	return (*frames.Get().(*[]byte))[:n]
}

// recycle returns a frame's body to the pool. Only a body that starts a
// pooled buffer is one (proto.ReadFrameBuf puts the head elsewhere, so an
// End's body is one too); others are left to the collector.
func recycle(b []byte) {
	if cap(b) != poolBuf {
		return
	}
	b = b[:poolBuf]
	frames.Put(&b)
}
