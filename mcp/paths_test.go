package mcp

import (
	"strings"
	"testing"
)

func TestWorkspacePath(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{in: "a.txt", want: "a.txt"},
		{in: "./src/../b.go", want: "b.go"},
		{in: "/workspace", want: "."},
		{in: "/workspace/x/y", want: "x/y"},
		{in: "/workspace/../etc/passwd", bad: true},
		{in: "/workspacefoo/x", bad: true},
		{in: "/etc/passwd", bad: true},
		{in: "../x", bad: true},
		{in: "a/../../x", bad: true},
		{in: "", bad: true},
		{in: "a\x00b", bad: true},
	} {
		got, err := workspacePath(tc.in)
		if tc.bad != (err != nil) || (!tc.bad && got != tc.want) {
			t.Errorf("workspacePath(%q) = %q, %v; want %q, bad=%v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

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

func TestOriginAllowed(t *testing.T) {
	for _, tc := range []struct {
		origin, host string
		want         bool
	}{
		{"http://localhost:7373", "127.0.0.1:7373", true},
		{"http://127.0.0.1:3000", "127.0.0.1:7373", true},
		{"http://evil.example", "127.0.0.1:7373", false},
		{"http://evil.example:7373", "evil.example:7373", false}, // DNS rebinding
		{"http://console.example", "warren.example", true},       // listed
		{"null", "127.0.0.1:7373", false},
	} {
		if got := originAllowed(tc.origin, tc.host, []string{"http://console.example"}); got != tc.want {
			t.Errorf("originAllowed(%q, %q) = %v", tc.origin, tc.host, got)
		}
	}
}
