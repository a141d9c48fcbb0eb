package main

import (
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// termFilter passes a jail's output to the host's terminal without the
// escape sequences that act outside the screen. The jail controls every byte
// it prints, and a terminal obeys more than colours: OSC 52 writes the
// clipboard, a tmux DCS passthrough reaches tmux's paste buffer and the outer
// terminal, window-op and status reports type answers into the terminal's
// input, mode changes (mouse reporting, bracketed paste, alternate screen,
// an 8-bit or non-UTF-8 character set) outlive the command.
//
// So the filter is an allowlist, applied to a stream that may split a
// sequence across writes (a small state machine in the manner of the DEC
// VT500 parser): printable text, newline, tab, carriage return and
// backspace; CSI sequences that style text or move and erase within the
// screen (SGR colours, cursor movement, erase in line and display except
// the scrollback, insert and delete); ESC 7/8 (save and restore the
// cursor), ESC D/E/M (index, next line, reverse index) and ESC = / ESC >
// (keypad). Everything else is dropped whole: OSC, DCS, SOS, PM and APC
// strings up to their terminator, other CSI and ESC sequences, other C0
// controls (BEL, ENQ's answerback, SO/SI), and C1 controls, whether encoded
// as UTF-8 (U+0080–U+009F, which xterm obeys) or as raw 8-bit bytes (not
// UTF-8: shown as U+FFFD). A sequence is only ever written whole, so the
// terminal is back in its ground state after every write. On a terminal
// whose locale is not UTF-8, every non-ASCII character becomes '?', as ls
// does, since there raw bytes 0x80–0x9f are C1 controls.
type termFilter struct {
	w     io.Writer
	ascii bool // the host terminal is not UTF-8
	plain bool // drop every escape and control: for one-line text like a prompt

	state  filterState
	seq    []byte  // parameters and intermediates of the sequence being read
	pend   [4]byte // a UTF-8 encoding split across writes
	pendN  int
	styled bool   // an SGR passed since the last end
	out    []byte // what one write passes on
}

type filterState uint8

const (
	ground    filterState = iota
	escape                // after ESC
	escInter              // ESC and intermediates: dropped at the final byte
	csi                   // CSI: parameters and intermediates
	csiIgnore             // a CSI too long to keep: dropped at the final byte
	str                   // OSC, DCS, SOS, PM, APC: dropped up to ST or BEL
	strEscape             // ESC inside a string: ST, or a new sequence
	strC2                 // 0xc2 inside a string: 0x9c makes U+009C, ST
)

// maxSeq bounds the parameters kept for one CSI; longer ones are dropped.
const maxSeq = 64

func newTermFilter(w io.Writer) *termFilter {
	return &termFilter{w: w, ascii: !localeIsUTF8()}
}

// localeIsUTF8 reports whether the host's locale says its terminal speaks
// UTF-8. No locale at all counts as UTF-8, today's default; an explicit
// other one (C, POSIX, ISO-8859-1) does not.
func localeIsUTF8() bool {
	for _, k := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := strings.ToLower(os.Getenv(k)); v != "" {
			return strings.Contains(v, "utf-8") || strings.Contains(v, "utf8")
		}
	}
	return true
}

// plainText returns s with every escape sequence and control character
// removed: jail-controlled text that warren prints itself, like the cwd in
// the prompt.
func plainText(s string) string {
	var b strings.Builder
	f := &termFilter{w: &b, ascii: !localeIsUTF8(), plain: true}
	f.Write([]byte(s))
	f.End()
	return b.String()
}

// Write filters p. It reports len(p) unless the terminal's write fails.
func (f *termFilter) Write(p []byte) (int, error) {
	f.out = f.out[:0]
	for _, b := range p {
		f.byte(b)
	}
	if len(f.out) > 0 {
		if _, err := f.w.Write(f.out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// End finishes a command's output: a sequence or character cut off by the
// end is dropped, and the colours are reset if the command changed them, so
// that the jail cannot style warren's own prompt and messages (concealed
// text, say).
func (f *termFilter) End() error {
	f.out = f.out[:0]
	f.end()
	if len(f.out) == 0 {
		return nil
	}
	_, err := f.w.Write(f.out)
	return err
}

func (f *termFilter) end() {
	for range f.pendN {
		f.invalid()
	}
	f.pendN = 0
	f.state, f.seq = ground, f.seq[:0]
	if f.styled {
		f.out = append(f.out, "\x1b[0m"...)
		f.styled = false
	}
}

func (f *termFilter) byte(b byte) {
	switch f.state {
	case ground:
		f.ground(b)
	case escape:
		f.escape(b)
	case escInter:
		switch {
		case b >= 0x20 && b <= 0x2f:
		case b >= 0x30 && b <= 0x7e:
			f.state = ground // charset designations and the like: dropped
		default:
			f.abort(b)
		}
	case csi, csiIgnore:
		f.csi(b)
	case str:
		switch b {
		case 0x1b:
			f.state = strEscape
		case 0x07, 0x18, 0x1a: // BEL ends an OSC; CAN and SUB cancel
			f.state = ground
		case 0xc2:
			f.state = strC2
		}
	case strC2:
		f.state = str
		if b == 0x9c {
			f.state = ground
		} else {
			f.byte(b)
		}
	case strEscape:
		if b == '\\' {
			f.state = ground
			return
		}
		// ESC starts a new sequence and ends the string, as terminals do.
		f.state = escape
		f.escape(b)
	}
}

func (f *termFilter) ground(b byte) {
	if f.pendN > 0 {
		if b&0xc0 == 0x80 && f.pendN < len(f.pend) {
			f.pend[f.pendN] = b
			f.pendN++
			if utf8.FullRune(f.pend[:f.pendN]) {
				f.decoded()
			}
			return
		}
		for range f.pendN { // cut short by a byte that cannot continue it
			f.invalid()
		}
		f.pendN = 0
	}
	switch {
	case b == '\n' || b == '\t' || b == '\r' || b == '\b':
		if !f.plain || b == '\t' {
			f.out = append(f.out, b)
		}
	case b == 0x1b:
		f.state = escape
	case b < 0x20 || b == 0x7f:
		// Other C0 controls: dropped.
	case b < 0x80:
		f.out = append(f.out, b)
	case b >= 0xc2 && b <= 0xf4:
		f.pend[0], f.pendN = b, 1
	default:
		f.invalid()
	}
}

// decoded handles the complete UTF-8 encoding in f.pend.
func (f *termFilter) decoded() {
	buf := f.pend[:f.pendN]
	f.pendN = 0
	r, n := utf8.DecodeRune(buf)
	switch {
	case r == utf8.RuneError && n <= 1:
		for range buf {
			f.invalid()
		}
	case r >= 0x80 && r <= 0x9f:
		f.c1(byte(r))
	case f.ascii:
		f.out = append(f.out, '?')
	default:
		f.out = append(f.out, buf...)
	}
}

// c1 handles a C1 control, which means what ESC and b-0x40 mean.
func (f *termFilter) c1(b byte) {
	f.state = escape
	f.escape(b - 0x40)
}

func (f *termFilter) invalid() {
	if f.ascii {
		f.out = append(f.out, '?')
	} else {
		f.out = append(f.out, "\uFFFD"...)
	}
}

func (f *termFilter) escape(b byte) {
	switch {
	case b == '[':
		f.state, f.seq = csi, f.seq[:0]
	case b == ']' || b == 'P' || b == 'X' || b == '^' || b == '_':
		f.state = str
	case b == 0x1b:
	case b >= 0x20 && b <= 0x2f:
		f.state = escInter
	case b >= 0x30 && b <= 0x7e:
		f.state = ground
		if !f.plain && strings.IndexByte("78DEM=>", b) >= 0 {
			f.out = append(f.out, 0x1b, b)
		}
	default:
		f.abort(b)
	}
}

func (f *termFilter) csi(b byte) {
	switch {
	case b >= 0x20 && b <= 0x3f:
		if f.state == csi && len(f.seq) < maxSeq {
			f.seq = append(f.seq, b)
		} else {
			f.state = csiIgnore
		}
	case b >= 0x40 && b <= 0x7e:
		if f.state == csi && !f.plain && allowedCSI(f.seq, b) {
			f.out = append(f.out, 0x1b, '[')
			f.out = append(f.out, f.seq...)
			f.out = append(f.out, b)
			if b == 'm' {
				f.styled = true
			}
		}
		f.state, f.seq = ground, f.seq[:0]
	default:
		f.abort(b)
	}
}

// abort drops the sequence being read, as a terminal does when a control
// interrupts it, and reads b afresh.
func (f *termFilter) abort(b byte) {
	f.state, f.seq = ground, f.seq[:0]
	if b != 0x18 && b != 0x1a { // CAN and SUB only cancel
		f.ground(b)
	}
}

// allowedCSI reports whether CSI params final only styles text or moves and
// erases within the screen. Private parameters (?, >, <, =) and
// intermediates, which select modes, reports and terminal-specific
// operations, are never allowed.
func allowedCSI(params []byte, final byte) bool {
	for _, c := range params {
		if !(c >= '0' && c <= '9' || c == ';' || c == ':' && final == 'm') {
			return false
		}
	}
	p := string(params)
	switch final {
	case 'm', // SGR: colours and attributes
		'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'f', 'd', 'e', 'a', '`', 'I', 'Z', // cursor movement
		'K', 'X', 'P', '@', 'L', 'M': // erase, delete and insert in the screen
		return true
	case 'J': // erase in display, but not 3: the scrollback, which is not the screen
		return p == "" || p == "0" || p == "1" || p == "2"
	case 'S', 'T': // scroll; with several parameters T is xterm's mouse tracking
		return !strings.Contains(p, ";")
	case 's', 'u': // save and restore the cursor; with parameters s sets margins
		return p == ""
	}
	return false
}
