package mcp

import (
	"strings"
	"testing"
)

func TestSliceLines(t *testing.T) {
	s := "1\n2\n3\n4"
	for _, tc := range []struct {
		offset, limit int
		want          string
		truncated     bool
	}{
		{0, 0, s, false},
		{2, 2, "2\n3\n", true},
		{4, 1, "4", false},
		{9, 1, "", false},
	} {
		got := sliceLines(s, tc.offset, tc.limit)
		if got.Content != tc.want || got.Truncated != tc.truncated || got.TotalLines != 4 {
			t.Errorf("sliceLines(%d, %d) = %+v", tc.offset, tc.limit, got)
		}
	}
	big := strings.Repeat(strings.Repeat("x", 1000)+"\n", 1000)
	if got := sliceLines(big, 1, 1000); len(got.Content) > maxReadOut || !got.Truncated {
		t.Errorf("byte cap not applied: %d bytes, truncated %v", len(got.Content), got.Truncated)
	}
}
