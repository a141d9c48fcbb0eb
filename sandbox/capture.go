package sandbox

import (
	"bytes"
	"fmt"
)

// statusCap bounds what the server holds of the status pipe during one
// command. A record is the shell's `export -p` and two short lines; an
// environment that large could not start a single program (execve allows a
// few MiB in all and 128 KiB a variable). More than that is output the
// shell wrote outside a command (an EXIT trap running `yes`): it goes to
// the command's stdout, which is bounded, instead of the server's memory.
const statusCap = 4 << 20

// addStatus appends what the status pipe carried. Past twice statusCap it
// moves all but the last statusCap bytes to stdout (a record comes last,
// so the bytes kept still end with it); moving in halves keeps the cost
// of the copy at one per byte.
func (r *run) addStatus(j *jail, p []byte) {
	r.status = append(r.status, p...)
	if len(r.status) >= 2*statusCap {
		extra := len(r.status) - statusCap
		r.emitStdout(j, r.status[:extra])
		r.status = append(r.status[:0], r.status[extra:]...)
	}
}

// emitStdout adds b to the command's stdout as if the stdout pipe had
// carried it.
func (r *run) emitStdout(j *jail, b []byte) {
	p := j.pipes[0]
	p.mu.Lock() // as the stdout reader feeds the same buffer
	defer p.mu.Unlock()
	r.emit(b)
}

// keepExitOutput adds to the command's stdout what the shell wrote to its
// own stdout, the status pipe, while it exited: dash undoes a command's
// redirections before it runs the EXIT trap, so `trap 'echo bye' EXIT;
// exit` prints "bye" there, after everything the command wrote to the
// output pipes (which collect has taken) and where no record will follow.
// Called once the shell is gone without a record. Nothing but the shell
// writes on that pipe: a command cannot name it (see script).
//
// The one other thing a dead shell may have left there is the start of its
// trailer's `export -p`, when a signal killed it in the middle (it never
// runs an EXIT trap then): that is state, not output, and is dropped.
func (r *run) keepExitOutput(j *jail) {
	if r.recOK {
		return
	}
	// The trap's last words may still be in the pipe: the read that the
	// jail's end interrupted (by moving its deadline to now) returns at
	// once, without taking what was buffered.
	j.readNow(func(p []byte) { r.addStatus(j, p) })
	if len(r.status) == 0 {
		return
	}
	out := r.status
	if i := bytes.Index(out, []byte("W"+r.nonce+" ")); i >= 0 {
		out = out[:i] // the start of the record
	}
	if j.exitCode > 128 && bytes.HasPrefix(out, []byte("export ")) {
		return
	}
	if len(out) > 0 {
		r.emitStdout(j, out)
	}
	r.status = nil
}

// capBuffer keeps the head and the tail of a stream and counts every byte,
// so a command may print gigabytes without the server holding them.
type capBuffer struct {
	max   int    // bytes kept in all: half head, half tail
	head  []byte // the first max/2 bytes
	tail  []byte // ring of the last max-max/2 bytes once head is full
	start int    // ring start when the tail has wrapped
	total int64
}

func newCapBuffer(max int) *capBuffer { return &capBuffer{max: max} }

func (c *capBuffer) Write(p []byte) {
	c.total += int64(len(p))
	headCap := c.max / 2
	if n := headCap - len(c.head); n > 0 {
		if n > len(p) {
			n = len(p)
		}
		c.head = append(c.head, p[:n]...)
		p = p[n:]
	}
	tailCap := c.max - headCap
	if len(p) == 0 || tailCap == 0 {
		return
	}
	if len(p) >= tailCap {
		c.tail = append(c.tail[:0], p[len(p)-tailCap:]...)
		c.start = 0
		return
	}
	if len(c.tail) < tailCap {
		room := tailCap - len(c.tail)
		if room >= len(p) {
			c.tail = append(c.tail, p...)
			return
		}
		c.tail = append(c.tail, p[:room]...)
		p = p[room:]
	}
	// The ring is full: overwrite from start, wrapping.
	for len(p) > 0 {
		n := copy(c.tail[c.start:], p)
		p = p[n:]
		c.start = (c.start + n) % tailCap
	}
}

// truncated reports whether bytes were dropped.
func (c *capBuffer) truncated() bool {
	return c.total > int64(len(c.head)+len(c.tail))
}

// bytes returns the kept output: everything when nothing was dropped, else
// head, a line saying how much was omitted, and tail.
func (c *capBuffer) bytes() []byte {
	tail := append(append([]byte(nil), c.tail[c.start:]...), c.tail[:c.start]...)
	if !c.truncated() {
		return append(append([]byte(nil), c.head...), tail...)
	}
	omitted := c.total - int64(len(c.head)+len(tail))
	var b bytes.Buffer
	b.Grow(len(c.head) + len(tail) + 64)
	b.Write(c.head)
	fmt.Fprintf(&b, "\n[... %d bytes omitted ...]\n", omitted)
	b.Write(tail)
	return b.Bytes()
}
