package mcp

import "testing"

func TestAcceptsGzip(t *testing.T) {
	for _, tc := range []struct {
		header []string
		want   bool
	}{
		{nil, false},
		{[]string{"gzip"}, true},
		{[]string{"deflate, GZIP;q=0.5"}, true},
		{[]string{"br", "gzip"}, true},
		{[]string{"gzip;q=0"}, false},
		{[]string{"gzip; q=0.0, *"}, false},
		{[]string{"*"}, true},
		{[]string{"*;q=0"}, false},
		{[]string{"identity"}, false},
		{[]string{"x-gzip"}, true},
	} {
		if got := acceptsGzip(tc.header); got != tc.want {
			t.Errorf("Accept-Encoding %q: gzip %v, want %v", tc.header, got, tc.want)
		}
	}
}
