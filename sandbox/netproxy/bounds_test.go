package netproxy

import (
	"fmt"
	"strings"
	"testing"
)

// TestAllowlistsAreBounded: an allowlist a client sends is kept by the
// session (database, memory, every refusal lists it). One with a hundred
// thousand entries, or with a megabyte entry, is refused with a short
// error that says what to do.
func TestAllowlistsAreBounded(t *testing.T) {
	many := make([]string, 100000)
	for i := range many {
		many[i] = fmt.Sprintf("h%d.example.com", i)
	}
	huge := strings.Repeat("a", 1<<20) + ".example.com"
	for _, c := range []struct {
		name  string
		items []string
		want  string
	}{
		{"many entries", many, "over the limit of 256"},
		{"a megabyte name", []string{huge}, "a host name is at most 253"},
		{"a megabyte preset name", []string{strings.Repeat("b", 1<<20)}, "no preset of that name"},
	} {
		rules, err := Expand(c.items, nil)
		if err == nil {
			t.Errorf("%s: allowed (%d rules)", c.name, len(rules))
			continue
		}
		if !strings.Contains(err.Error(), c.want) || len(err.Error()) > 1<<10 {
			t.Errorf("%s: error of %d bytes: %.300s", c.name, len(err.Error()), err)
		}
	}
	if _, err := Expand(many[:MaxAllow], nil); err != nil {
		t.Errorf("an allowlist of %d entries: %v", MaxAllow, err)
	}
}
