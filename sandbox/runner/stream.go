package runner

import (
	"bytes"
	"context"
	"io"
	"slices"
	"sync"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// stream is one request's life in the runner.
type stream struct {
	s      *Server
	id     uint32
	ctx    context.Context
	cancel context.CancelFunc
	in     input

	mu     sync.Mutex
	cond   *sync.Cond
	credit int64
	out    []byte // not yet sent: sent when full, or before the End
	// keep: a Cancel interrupts the work but not its output, which the
	// server reads to the End (Call.KeepOutput); gone: the connection or
	// the stream has ended, and nothing more is sent.
	keep, gone bool
}

func newStream(s *Server, id uint32) *stream {
	ctx, cancel := context.WithCancel(context.Background())
	st := &stream{s: s, id: id, ctx: ctx, credit: proto.InitialCredit}
	st.cond = sync.NewCond(&st.mu)
	st.in.cond = sync.NewCond(&st.in.mu)
	st.cancel = func() {
		cancel()
		st.mu.Lock()
		st.cond.Broadcast()
		st.mu.Unlock()
		st.in.add(nil, true)
	}
	return st
}

// end marks the stream done with: a writer waiting for credit gives up.
func (st *stream) end() {
	st.mu.Lock()
	st.gone = true
	st.mu.Unlock()
	st.cancel()
}

// stopped reports whether a writer should stop waiting for credit.
// Called with st.mu held.
func (st *stream) stopped() bool {
	return st.gone || (!st.keep && st.ctx.Err() != nil)
}

// grant adds credit the server gave.
func (st *stream) grant(n int64) {
	st.mu.Lock()
	st.credit += n
	st.cond.Broadcast()
	st.mu.Unlock()
}

// Write sends p as Data frames, each at most proto.MaxBody, waiting for
// credit. Small writes are gathered until 64 KiB or the end of the call.
func (st *stream) Write(p []byte) (int, error) {
	n := len(p)
	st.out = append(st.out, p...)
	for len(st.out) >= 64<<10 {
		if err := st.sendOut(min(len(st.out), proto.MaxBody), true); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// Grow makes room for n more bytes of output, so that ReadFrom reads a
// file of known size in one piece.
func (st *stream) Grow(n int) { st.out = slices.Grow(st.out, n) }

// ReadFrom reads r into the gathered output directly (io.Copy uses it):
// a file the runner sends is copied once, not through a buffer first.
func (st *stream) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	for {
		if cap(st.out)-len(st.out) < 512 {
			st.out = slices.Grow(st.out, max(4<<10, len(st.out)))
		}
		m, err := r.Read(st.out[len(st.out):cap(st.out)])
		st.out = st.out[:len(st.out)+m]
		n += int64(m)
		for len(st.out) >= 64<<10 {
			if err := st.sendOut(min(len(st.out), proto.MaxBody), true); err != nil {
				return n, err
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// flushOut sends what Write gathered now (Call.Flush: output someone
// watches as it comes).
func (st *stream) flushOut() error {
	for len(st.out) > 0 {
		if err := st.sendOut(min(len(st.out), proto.MaxBody), true); err != nil {
			return err
		}
	}
	return nil
}

// sendOut sends the first n bytes gathered once the credit allows,
// flushing them unless the caller sends another frame at once.
func (st *stream) sendOut(n int, flush bool) error {
	if err := st.take(n); err != nil {
		return err
	}
	if err := st.s.write(proto.Frame{Kind: proto.Data, Stream: st.id, Body: st.out[:n]}, flush); err != nil {
		return err
	}
	st.out = append(st.out[:0], st.out[n:]...)
	return nil
}

// take waits until the credit allows n bytes and takes them.
func (st *stream) take(n int) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	for st.credit < int64(n) && !st.stopped() {
		st.cond.Wait()
	}
	if st.stopped() {
		return proto.Errorf(proto.CodeUnavailable, "cancelled")
	}
	st.credit -= int64(n)
	return nil
}

// tail sends what Write gathered past one frame's body and returns the
// rest, its credit taken, for the End to carry: a short operation's
// output and its reply go in one frame.
func (st *stream) tail() ([]byte, error) {
	for len(st.out) > proto.MaxBody {
		if err := st.sendOut(proto.MaxBody, true); err != nil {
			return nil, err
		}
	}
	if len(st.out) == 0 {
		return nil, nil
	}
	if err := st.take(len(st.out)); err != nil {
		return nil, err
	}
	return st.out, nil
}

// input is a request's input as it arrives.
type input struct {
	mu     sync.Mutex
	cond   *sync.Cond
	chunks [][]byte
	done   bool
}

func (in *input) add(b []byte, last bool) {
	in.mu.Lock()
	if len(b) > 0 && !in.done {
		in.chunks = append(in.chunks, b)
	}
	if last {
		in.done = true
	}
	in.cond.Broadcast()
	in.mu.Unlock()
}

// Read reads the input, waiting for the next piece.
func (in *input) Read(p []byte) (int, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for len(in.chunks) == 0 && !in.done {
		in.cond.Wait()
	}
	if len(in.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, in.chunks[0])
	if n == len(in.chunks[0]) {
		in.chunks = in.chunks[1:]
	} else {
		in.chunks[0] = in.chunks[0][n:]
	}
	return n, nil
}
