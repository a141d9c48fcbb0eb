package runner

import (
	"encoding/binary"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// pipeReader drains one output pipe of the shell for the shell's whole
// life and hands each chunk to the running command, if any, so the shell
// and its background jobs never block on a full pipe. Each read and the
// feeding of what it read happen under mu: whoever holds mu knows that
// every byte read so far has been fed, which lets a command's end be found
// without end markers in the output streams (see drain).
type pipeReader struct {
	f   *os.File
	rc  syscall.RawConn
	eof chan struct{}

	mu     sync.Mutex // guards feed, buf and closed, and is held across read+feed
	feed   func([]byte)
	buf    []byte
	closed bool // EOF or an error was read: the descriptor is done with
}

// pipeBuf is what one read of an output pipe takes: the pipe's own size,
// so a chatty command costs one read per pipeful.
const pipeBuf = 64 << 10

func newPipeReader(f *os.File) (*pipeReader, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &pipeReader{f: f, rc: rc, eof: make(chan struct{})}, nil
}

// readLocked reads once from fd and feeds what came. It reports whether
// the pipe would block, and ends the reader at EOF or on an error.
func (p *pipeReader) readLocked(fd uintptr) (wouldBlock bool) {
	if p.buf == nil {
		p.buf = make([]byte, pipeBuf)
	}
	n, wouldBlock, end := readOnce(fd, p.buf)
	if n > 0 && p.feed != nil {
		p.feed(p.buf[:n])
	}
	if end {
		p.closed = true
	}
	return wouldBlock
}

// readOnce reads what the non-blocking descriptor fd holds into buf,
// without waiting: n bytes, or wouldBlock when it holds nothing yet, or
// end at EOF or on an error.
func readOnce(fd uintptr, buf []byte) (n int, wouldBlock, end bool) {
	for {
		n, err := unix.Read(int(fd), buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, true, false
		case n > 0:
			return n, false, false
		default:
			return 0, false, true
		}
	}
}

func (p *pipeReader) loop() {
	defer close(p.eof)
	for {
		err := p.rc.Read(func(fd uintptr) bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return !p.readLocked(fd) // false: wait until readable, then call again
		})
		p.mu.Lock()
		done := p.closed || err != nil
		p.closed = done
		p.mu.Unlock()
		if done {
			p.f.Close()
			return
		}
	}
}

// drain reads and feeds, under mu, everything the pipe holds now, then
// sets the feed to next. Bytes a process wrote before the call are fed to
// the old feed by the time it returns, whichever goroutine read them.
func (p *pipeReader) drain(next func([]byte)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		_ = p.rc.Control(func(fd uintptr) {
			for !p.closed && !p.readLocked(fd) {
			}
		})
	}
	p.feed = next
}

func (p *pipeReader) setFeed(f func([]byte)) {
	p.mu.Lock()
	p.feed = f
	p.mu.Unlock()
}

// take reads and feeds everything the pipe holds now.
func (p *pipeReader) take() {
	p.mu.Lock()
	next := p.feed
	p.mu.Unlock()
	p.drain(next) // only the running command sets the feed
}

// flushDelay is how long output waits for more before it is sent: a
// short command's output then rides in its End, and a long one's reaches
// whoever watches it within a few milliseconds.
const flushDelay = 3 * time.Millisecond

// sink writes a command's output records to its call's stream (see
// proto.OpShellExec), one writer at a time. Output of the same stream
// that comes before the gathered bytes are sent extends the last record
// instead of starting one: a command whose writes come a few KiB at a time
// costs the server one record per frame, not one per write.
type sink struct {
	c      *Call
	mu     sync.Mutex
	closed bool
	err    error
	armed  bool
	timer  *time.Timer
	// last is where the last record's header is in the stream's gathered
	// bytes, -1 when they hold none (sent, or not started).
	last int
	tag  byte
}

func newSink(c *Call) *sink { return &sink{c: c, last: -1} }

// recorder takes a command's output as records of a tag (proto.RecStdout,
// RecStderr, RecExports): the runner's sink sends them on the call's
// stream; a Driver's hands them to the server directly.
type recorder interface {
	feed(tag byte) func([]byte)
	write(tag byte, b []byte)
	close()
}

// feed returns a feed for tag's pipe.
func (k *sink) feed(tag byte) func([]byte) {
	return func(b []byte) { k.write(tag, b) }
}

// write sends b as a record of tag.
func (k *sink) write(tag byte, b []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed || k.err != nil || len(b) == 0 {
		return
	}
	st := k.c.st
	if k.last >= 0 && k.tag == tag {
		h := st.out[k.last+1 : k.last+proto.RecHeader]
		binary.BigEndian.PutUint32(h, binary.BigEndian.Uint32(h)+uint32(len(b)))
	} else {
		k.last, k.tag = len(st.out), tag
		st.out = append(st.out, tag, 0, 0, 0, 0)
		binary.BigEndian.PutUint32(st.out[k.last+1:], uint32(len(b)))
	}
	st.out = append(st.out, b...)
	if len(st.out) >= 64<<10 {
		k.last = -1 // sending moves the gathered bytes
		k.err = st.flushOut()
		return
	}
	if !k.armed {
		k.armed = true
		if k.timer == nil {
			k.timer = time.AfterFunc(flushDelay, k.flush)
		} else {
			k.timer.Reset(flushDelay)
		}
	}
}

// flush sends what the stream has gathered.
func (k *sink) flush() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.armed = false
	if !k.closed && k.err == nil {
		k.last = -1
		k.err = k.c.Flush()
	}
}

// close ends the sink: later writes are dropped, and what is gathered
// goes with the call's End.
func (k *sink) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	if k.timer != nil {
		k.timer.Stop()
	}
}
