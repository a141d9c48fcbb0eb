package events

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/warrenhq/warren/metering"
)

// MaxCommandOutput bounds the output one command leaves in the log; the
// rest is counted in a final note. The command's caller still gets all of
// it from shell_exec: the log is for watching.
const MaxCommandOutput = 256 << 10

// maxHeld bounds the text held back while a line or a private key block is
// incomplete; past it the held text is let through (redacted as a whole).
const maxHeld = 64 << 10

// gather is how long output gathers before complete lines are logged: one
// event per line would let a chatty command push everything else out of
// the session's bounded log.
const gather = 50 * time.Millisecond

// gatherBytes logs complete lines at once when this much is held.
const gatherBytes = 8 << 10

// flushAfter is how long an incomplete line waits before it is logged
// anyway (a prompt, a progress bar).
const flushAfter = 200 * time.Millisecond

// Stream turns a command's raw output into output events. Chunks are cut
// at line ends before they are redacted, so that a secret split over two
// reads of the pipe is seen whole; a private key block is held until its
// end line.
type Stream struct {
	log     *Log
	session string
	call    string
	tool    string
	client  string

	// mu protects the fields below.
	mu      sync.Mutex
	held    [2][]byte // per stream: text not yet logged
	since   [2]time.Time
	logged  int   // bytes logged so far
	dropped int64 // bytes not logged because of MaxCommandOutput
	timer   *time.Timer
	closed  bool
}

var streamNames = [2]string{"stdout", "stderr"}

// Stream returns the output recorder of one command of session, run by the
// tool call call.
func (l *Log) Stream(session, call, tool, client string) *Stream {
	return &Stream{log: l, session: session, call: call, tool: tool, client: client}
}

// Write records a chunk of the command's standard output (stderr false) or
// error. It never blocks on the database.
func (s *Stream) Write(stderr bool, chunk []byte) {
	if s == nil || len(chunk) == 0 {
		return
	}
	i := 0
	if stderr {
		i = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if len(s.held[i]) == 0 {
		s.since[i] = time.Now()
	}
	s.held[i] = append(s.held[i], chunk...)
	if len(s.held[i]) >= gatherBytes {
		s.emitLocked(i, false)
	}
	if (len(s.held[0]) > 0 || len(s.held[1]) > 0) && s.timer == nil {
		s.timer = time.AfterFunc(gather, s.tick)
	}
}

// tick logs the complete lines held, and incomplete ones that waited long
// enough.
func (s *Stream) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer = nil
	if s.closed {
		return
	}
	for i := range s.held {
		if len(s.held[i]) > 0 {
			s.emitLocked(i, time.Since(s.since[i]) >= flushAfter)
		}
	}
	if len(s.held[0]) > 0 || len(s.held[1]) > 0 {
		s.timer = time.AfterFunc(gather, s.tick)
	}
}

// Close logs what is held and a note of what the cap left out.
func (s *Stream) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for i := range s.held {
		s.emitLocked(i, true)
	}
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.dropped > 0 {
		s.log.Append(Event{Session: s.session, Kind: KindOutput, Call: s.call, Tool: s.tool, Client: s.client,
			Stream: "stderr", Text: fmt.Sprintf("\n[%d more bytes of output not kept in the activity log]\n", s.dropped)})
	}
}

// emitLocked logs the complete lines held for stream i, or everything held
// with all (a timer fired, the command ended, or too much is held).
func (s *Stream) emitLocked(i int, all bool) {
	held := s.held[i]
	n := 0
	if end := bytes.LastIndexByte(held, '\n'); end >= 0 {
		n = end + 1
	}
	force := all || len(held) > maxHeld
	if force {
		n = len(held)
	}
	// Never split a UTF-8 sequence.
	for n > 0 && n < len(held) && !utf8.RuneStart(held[n]) {
		n--
	}
	out := held[:n]
	// A private key block whose end line has not come: hold it back whole
	// until it does; forced out, it is replaced, never logged in part.
	if b := openKeyBlock(out); b >= 0 {
		if !force {
			n = b
			out = held[:b]
		} else {
			out = append(append([]byte(nil), held[:b]...), []byte(metering.Redacted+" (an unfinished private key block)\n")...)
		}
	}
	if n == 0 {
		return
	}
	s.held[i] = append([]byte(nil), held[n:]...)
	s.since[i] = time.Now()
	s.appendLocked(i, out)
}

// appendLocked logs out as output events of at most MaxText bytes each,
// within MaxCommandOutput.
func (s *Stream) appendLocked(i int, out []byte) {
	if room := max(MaxCommandOutput-s.logged, 0); len(out) > room {
		s.dropped += int64(len(out) - room)
		out = out[:room]
	}
	for len(out) > 0 {
		k := min(len(out), MaxText-64)
		for k < len(out) && k > 0 && !utf8.RuneStart(out[k]) {
			k--
		}
		s.log.Append(Event{Session: s.session, Kind: KindOutput, Call: s.call, Tool: s.tool, Client: s.client,
			Stream: streamNames[i], Text: strings.ToValidUTF8(string(out[:k]), "\uFFFD")})
		s.logged += k
		out = out[k:]
	}
}

// openKeyBlock returns where a private key block begins in b when its end
// line is not in b yet, or -1.
func openKeyBlock(b []byte) int {
	begin := bytes.LastIndex(b, []byte("-----BEGIN "))
	if begin < 0 {
		return -1
	}
	rest := b[begin:]
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	if !bytes.Contains(line, []byte("PRIVATE KEY")) {
		return -1
	}
	if bytes.Contains(rest, []byte("-----END ")) {
		return -1
	}
	return begin
}
