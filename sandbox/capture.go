package sandbox

import (
	"bytes"
	"fmt"
)

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
