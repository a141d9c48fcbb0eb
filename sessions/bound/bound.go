// Package bound cuts strings that a client or a jail controls to a size
// warren can afford to store, log or keep in memory. Every string that
// comes from outside (a host name a jail asks the proxy for, the name an
// MCP client gives itself, a model name in a usage record) passes through
// String, or through a check against one of the limits below, before it
// is kept anywhere.
//
// Standard library only: every package may import it.
package bound

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits shared across packages, in bytes.
const (
	// Name is the most kept of a name a client gives: an MCP client's
	// name and version, a model name.
	Name = 128
	// Host is the longest DNS name (RFC 1035).
	Host = 253
	// Target is the most kept of a proxy request's target as written
	// (a host, a port and brackets).
	Target = Host + 16
	// Reason is the most kept of an explanation that quotes input.
	Reason = 512
	// Line is the most one logged field carries.
	Line = 1 << 10
)

// String returns s when it is at most max bytes, and otherwise its longest
// prefix that is valid UTF-8 and, with a note of the bytes left out
// ("…(+N bytes)"), fits in max bytes. Each run of invalid UTF-8 in what
// is kept becomes "?", so a cut string is always valid. max below the note's
// length keeps only the note.
func String(s string, max int) string {
	if len(s) <= max {
		return s
	}
	keep := max
	for {
		note := "…(+" + strconv.Itoa(len(s)-keep) + " bytes)"
		if keep+len(note) <= max || keep == 0 {
			return valid(s[:keep]) + note
		}
		keep = max - len(note)
		if keep < 0 {
			keep = 0
		}
		for keep > 0 && !utf8.RuneStart(s[keep]) {
			keep--
		}
	}
}

// valid replaces each run of invalid UTF-8 in s (which the input may
// hold; the cut never makes one) with "?", which never makes s longer.
func valid(s string) string { return strings.ToValidUTF8(s, "?") }
