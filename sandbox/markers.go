package sandbox

import "bytes"

// markerScanner cuts one command's output out of a shell's output stream.
// The shell prints a start marker before the command and an end marker
// after it; both carry a nonce that is fresh for every command, so neither
// the command's output nor an earlier command's can forge them. Bytes before
// the start marker (a background job's chatter) and after the end marker are
// dropped. Markers are found in the byte stream, not in lines: output may be
// binary, unterminated or one huge line.
type markerScanner struct {
	start, end []byte
	phase      int    // seekStart, capturing, finished
	carry      []byte // bytes held back because they may begin a marker
	emit       func([]byte)
}

const (
	seekStart = iota
	capturing
	finished
)

// feed consumes a chunk and reports whether the end marker has been seen.
func (m *markerScanner) feed(p []byte) bool {
	if m.phase == finished {
		return true
	}
	if m.phase == seekStart {
		buf := m.join(p)
		i := bytes.Index(buf, m.start)
		if i < 0 {
			m.hold(buf, m.start, len(buf))
			return false
		}
		m.phase = capturing
		p = buf[i+len(m.start):]
		m.carry = m.carry[:0]
	}
	buf := m.join(p)
	if i := bytes.Index(buf, m.end); i >= 0 {
		if i > 0 {
			m.emit(buf[:i])
		}
		m.phase = finished
		m.carry = nil
		return true
	}
	keep := partialSuffix(buf, m.end)
	if n := len(buf) - keep; n > 0 {
		m.emit(buf[:n])
	}
	m.hold(buf, m.end, len(buf)-keep)
	return false
}

// flush emits whatever was held back; used when the stream ends without an
// end marker (the shell died mid-command).
func (m *markerScanner) flush() {
	if m.phase == capturing && len(m.carry) > 0 {
		m.emit(m.carry)
	}
	m.carry = nil
	m.phase = finished
}

// join prepends the held-back bytes to p without copying when there are none.
func (m *markerScanner) join(p []byte) []byte {
	if len(m.carry) == 0 {
		return p
	}
	return append(m.carry, p...)
}

// hold keeps buf[from:] (at most len(marker)-1 bytes that may start marker)
// for the next chunk.
func (m *markerScanner) hold(buf, marker []byte, from int) {
	if m.phase == seekStart {
		from = len(buf) - partialSuffix(buf, marker)
	}
	rest := buf[from:]
	if len(rest) == 0 {
		m.carry = m.carry[:0]
		return
	}
	m.carry = append(make([]byte, 0, len(marker)), rest...)
}

// partialSuffix returns the length of the longest suffix of buf that is a
// proper prefix of marker.
func partialSuffix(buf, marker []byte) int {
	n := len(marker) - 1
	if n > len(buf) {
		n = len(buf)
	}
	for ; n > 0; n-- {
		if bytes.HasPrefix(marker, buf[len(buf)-n:]) {
			return n
		}
	}
	return 0
}
