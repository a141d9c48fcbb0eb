package events

import (
	"strings"

	"github.com/warrenhq/warren/metering"
)

// needles are the substrings (lower case) without which none of
// metering.Redact's patterns can match: a line holding none of them is
// kept as is. Redact costs about 2 ms per KB of text; a command's output
// is mostly lines without any of these.
var needles = []string{
	"bearer", "basic", "pass", "secret", "token", "key", "credential", "://",
	"sk-", "gh", "github_pat_", "akia", "asia", "abia", "acca", "xox", "aiza", "eyj", "wrn_",
	"wat_", "wrt_", "wcs_", "wac_",
}

func suspicious(line string) bool {
	l := strings.ToLower(line)
	for _, n := range needles {
		if strings.Contains(l, n) {
			return true
		}
	}
	return false
}

// redact is metering.Redact, run only on the lines that could hold a
// secret. A suspicious line is redacted together with the lines that
// follow it while they are suspicious too, and with one more, because a
// key and its value may be split by a line break ("password:\n  x"). A
// private key block spans lines: text holding one is redacted whole.
func redact(s string) string {
	if strings.Contains(s, "-----BEGIN") {
		return metering.Redact(s)
	}
	if !suspicious(s) {
		return s
	}
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(lines); i++ {
		if !suspicious(lines[i]) {
			b.WriteString(lines[i])
			continue
		}
		j := i + 1
		for j < len(lines) && suspicious(lines[j]) {
			j++
		}
		j = min(j+1, len(lines))
		b.WriteString(redactPieces(strings.Join(lines[i:j], "")))
		i = j - 1
	}
	return b.String()
}

// maxPiece bounds the text given to metering.Redact at once: it costs
// about a microsecond per byte, and more on long runs of word characters.
const maxPiece = 2 << 10

// redactPieces redacts s in pieces of at most maxPiece bytes. A piece is
// cut, where its last quarter allows, after a space, a quote or one of
// "&;,<>" that does not follow a key's "=" or ":" nor "Bearer": none of
// the secrets Redact knows holds those, so such a cut splits none. A run
// of 512 bytes without one is cut where it reaches the limit.
func redactPieces(s string) string {
	if len(s) <= maxPiece {
		return metering.Redact(s)
	}
	var b strings.Builder
	for len(s) > maxPiece {
		cut := maxPiece
		for k := maxPiece - 1; k >= maxPiece*3/4; k-- {
			if strings.IndexByte(" \t\n\"'&;,<>", s[k]) >= 0 && !joinsKeyAndValue(s[:k], s[k+1:]) {
				cut = k + 1
				break
			}
		}
		b.WriteString(metering.Redact(s[:cut]))
		s = s[cut:]
	}
	b.WriteString(metering.Redact(s))
	return b.String()
}

// joinsKeyAndValue reports whether a cut between before and after would
// fall where a key and its value, or an authorization scheme and its
// credentials, meet.
func joinsKeyAndValue(before, after string) bool {
	b := strings.ToLower(strings.TrimRight(before, " \t\n\"'"))
	a := strings.TrimLeft(after, " \t\n\"'")
	return strings.HasSuffix(b, "=") || strings.HasSuffix(b, ":") || strings.HasSuffix(b, "bearer") ||
		strings.HasSuffix(b, "basic") || strings.HasPrefix(a, "=") || strings.HasPrefix(a, ":")
}
