package mcp

import (
	"net/http/httptest"
	"testing"
)

// TestForwardedForBelievesOnlyTrustedHops: through a trusted proxy, the
// client is the last X-Forwarded-For entry that is not a trusted proxy;
// what the client itself put before it (a spoofed address) is never
// taken, so a client cannot pick the address it is limited as.
func TestForwardedForBelievesOnlyTrustedHops(t *testing.T) {
	proxies, err := ParseTrustedProxies([]string{"10.0.0.0/8, 192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	l := NewConnLimiter(nil, ConnLimits{TrustedProxies: proxies})
	for _, c := range []struct{ xff, want string }{
		{"", "192.0.2.7"},                                      // no header: the proxy itself
		{"203.0.113.5", "203.0.113.5"},                         // what the proxy appended
		{"198.51.100.1, 203.0.113.5", "203.0.113.5"},           // spoofed first entry ignored
		{"198.51.100.1, 203.0.113.5, 10.1.2.3", "203.0.113.5"}, // a second trusted hop
		{"not-an-ip, 203.0.113.5", "203.0.113.5"},
		{"203.0.113.5, garbage", "192.0.2.7"}, // an entry the proxy did not write: trust nothing before it
	} {
		r := httptest.NewRequest("GET", "/mcp", nil)
		r.RemoteAddr = "192.0.2.7:5000"
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := l.forwardedFor(r); got != c.want {
			t.Errorf("X-Forwarded-For %q: client %s, want %s", c.xff, got, c.want)
		}
	}
	if _, err := ParseTrustedProxies([]string{"10.0.0.0/33"}); err == nil {
		t.Error("a bad CIDR was accepted")
	}
}
