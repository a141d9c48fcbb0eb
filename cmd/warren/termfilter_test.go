package main

import (
	"strings"
	"testing"
)

func TestTermFilter(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"text", "héllo\tworld\r\n", "héllo\tworld\r\n"},
		{"backspace", "ab\bc", "ab\bc"},
		{"sgr colours", "\x1b[1;31mred\x1b[0m \x1b[38;2;1;2;3mrgb\x1b[38:5:9mx\x1b[m", "\x1b[1;31mred\x1b[0m \x1b[38;2;1;2;3mrgb\x1b[38:5:9mx\x1b[m" + "\x1b[0m"}, // End resets colours after SGR
		{"cursor and erase", "\x1b[2J\x1b[H\x1b[10;5H\x1b[3A\x1b[K\x1b[2K\x1b[5X\x1b[s\x1b[u", "\x1b[2J\x1b[H\x1b[10;5H\x1b[3A\x1b[K\x1b[2K\x1b[5X\x1b[s\x1b[u"},
		{"esc save restore", "\x1b7x\x1b8", "\x1b7x\x1b8"},
		{"osc 52 with BEL", "a\x1b]52;c;aGFjaw==\ab", "ab"},
		{"osc 52 with ST", "a\x1b]52;c;aGFjaw==\x1b\\b", "ab"},
		{"osc title", "a\x1b]0;pwned\ab", "ab"},
		{"osc 8 hyperlink", "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"tmux passthrough", "a\x1bPtmux;\x1b\x1b]52;c;aGFjaw==\a\x1b\\b", "ab"},
		{"dcs decrqss", "a\x1bP$qm\x1b\\b", "ab"},
		{"apc pm sos", "a\x1b_x\x1b\\\x1b^y\x1b\\\x1bXz\x1b\\b", "ab"},
		{"window ops and reports", "a\x1b[21t\x1b[8;1;1t\x1b[6n\x1b[c\x1b[>c\x1b[5ib", "ab"},
		{"private modes", "a\x1b[?1000h\x1b[?2004h\x1b[?1049h\x1b[?25lb", "ab"},
		{"ansi modes", "a\x1b[4h\x1b[20hb", "ab"},
		{"scrollback erase and margins", "a\x1b[3J\x1b[1;2r\x1b[1;5sb", "ab"},
		{"decrqm and soft reset", "a\x1b[?1$p\x1b[!pb", "ab"},
		{"charset, 8-bit controls, utf-8 off", "a\x1b(0\x1b G\x1b%@\x1b#8\x1bcb", "ab"},
		{"decid and answerback", "a\x1bZ\x05\ab", "ab"},
		{"c1 in utf-8", "a\u009b6n\u009d52;c;aGFjaw==\a\u0090x\u009cb", "ab"},
		{"c1 as raw bytes", "a\x9b6n\x9db", "a\uFFFD6n\uFFFDb"},
		{"invalid utf-8", "a\xff\xc3b\xed\xa0\x80", "a\uFFFD\uFFFDb\uFFFD\uFFFD\uFFFD"},
		{"sequence cut by newline", "a\x1b[31\nb", "a\nb"},
		{"can cancels", "a\x1b[31\x18b", "ab"},
		{"overlong csi", "a\x1b[" + strings.Repeat("1;", 100) + "mb", "ab"},
		{"unterminated osc eats to end", "a\x1b]52;c;aGFjaw==", "a"},
		{"cut utf-8 at end", "a\xe2\x82", "a\uFFFD\uFFFD"},
	} {
		for _, split := range []int{0, 1, 2, 3} {
			var b strings.Builder
			f := &termFilter{w: &b}
			writeSplit(f, tc.in, split)
			f.End()
			if got := b.String(); got != tc.want {
				t.Errorf("%s (split %d): got %q, want %q", tc.name, split, got, tc.want)
			}
		}
	}
}

// writeSplit writes s in pieces of n bytes (all at once for 0): sequences
// and characters split across reads must be handled as whole ones.
func writeSplit(f *termFilter, s string, n int) {
	if n == 0 {
		f.Write([]byte(s))
		return
	}
	for len(s) > 0 {
		k := min(n, len(s))
		f.Write([]byte(s[:k]))
		s = s[k:]
	}
}

func TestTermFilterASCIITerminal(t *testing.T) {
	var b strings.Builder
	f := &termFilter{w: &b, ascii: true}
	f.Write([]byte("é ě \x9b6n \u009b6n ok"))
	f.End()
	if got, want := b.String(), "? ? ?6n  ok"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestPlainText(t *testing.T) {
	got := plainText("/workspace/d\x1b]52;c;aGFjaw==\a\x1b[31m\r\nx\ty")
	if want := "/workspace/dx\ty"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
