package bound

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestStringKeepsShortAndCutsLong(t *testing.T) {
	if got := String("short", 10); got != "short" {
		t.Fatalf("short string changed: %q", got)
	}
	long := strings.Repeat("é", 1<<20) // 2 MiB of two-byte runes
	for _, max := range []int{0, 5, 16, 17, 128, 253, 1000} {
		got := String(long, max)
		if len(got) > max && max >= 24 {
			t.Errorf("max %d: kept %d bytes", max, len(got))
		}
		if !utf8.ValidString(got) {
			t.Errorf("max %d: invalid UTF-8 %q", max, got)
		}
		if !strings.Contains(got, "bytes)") {
			t.Errorf("max %d: no note of the cut: %q", max, got)
		}
	}
	got := String(strings.Repeat("a", 300), 100)
	if want := strings.Repeat("a", 85) + "…(+215 bytes)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := String("\xff\xfe"+strings.Repeat("b", 50), 20); !utf8.ValidString(got) || !strings.HasPrefix(got, "?b") {
		t.Errorf("invalid input: %q", got)
	}
}
