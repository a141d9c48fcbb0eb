package netproxy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/sessions/bound"
)

// Host is a request's target host after normalisation: either a DNS name
// (lower case, no trailing dot) or an IP address, whatever notation the
// client wrote it in.
type Host struct {
	// Name is the DNS name; empty for an IP literal.
	Name string
	// IP is the literal address; invalid for a name.
	IP netip.Addr
}

// String renders the host canonically: the name, or the address (IPv6 in
// brackets is the caller's business).
func (h Host) String() string {
	if h.Name != "" {
		return h.Name
	}
	return h.IP.String()
}

// ParseHost normalises the host part of a request target. Every notation
// of an IPv4 address that a C library or a browser accepts (decimal
// 2130706433, octal 0177.0.0.1, hex 0x7f.1, short forms 127.1) becomes the
// address it means, so that it meets the same address checks as a
// resolved name; IPv6 literals may be bracketed; zone ids, percent signs,
// non-ASCII names and names that end in a numeric label but are no valid
// address are refused.
func ParseHost(s string) (Host, error) {
	orig := shown(s)
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return Host{}, fmt.Errorf("host %q: unbalanced brackets", orig)
		}
		s = s[1 : len(s)-1]
		if strings.Contains(s, "%") {
			return Host{}, fmt.Errorf("host %q: IPv6 zone ids are refused", orig)
		}
		ip, err := netip.ParseAddr(s)
		if err != nil || !ip.Is6() {
			return Host{}, fmt.Errorf("host %q: not an IPv6 address", orig)
		}
		return Host{IP: ip}, nil
	}
	if strings.Contains(s, "%") {
		return Host{}, fmt.Errorf("host %q: percent signs and zone ids are refused", orig)
	}
	if strings.Contains(s, ":") {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return Host{}, fmt.Errorf("host %q: not a valid IPv6 address", orig)
		}
		return Host{IP: ip}, nil
	}
	s = strings.ToLower(strings.TrimSuffix(s, "."))
	if s == "" {
		return Host{}, errors.New("empty host")
	}
	if len(s) > bound.Host {
		return Host{}, fmt.Errorf("host %q: %d bytes, longer than 253 characters", orig, len(s))
	}
	labels := strings.Split(s, ".")
	if last := labels[len(labels)-1]; numericLabel(last) {
		// A name whose last label is a number is an IPv4 address in some
		// notation, or nothing: resolvers and browsers disagree on the
		// rest, so anything that is not a valid address is refused.
		ip, ok := parseIPv4Any(labels)
		if !ok {
			return Host{}, fmt.Errorf("host %q: looks like an IPv4 address but is not a valid one", orig)
		}
		return Host{IP: ip}, nil
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return Host{}, fmt.Errorf("host %q: empty or over-long label", orig)
		}
		for _, c := range l {
			ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				if c > 127 {
					return Host{}, fmt.Errorf("host %q: non-ASCII names must be written in their punycode (xn--) form", orig)
				}
				return Host{}, fmt.Errorf("host %q: character %q is not allowed in a host name", orig, c)
			}
		}
	}
	return Host{Name: s}, nil
}

// shown is what an error quotes of a target the client wrote: the jail
// controls it, and errors become refusals that are logged and stored.
func shown(s string) string { return bound.String(s, bound.Target) }

// numericLabel reports whether a label is a number in C notation: decimal,
// octal with a leading 0, or hex with 0x.
func numericLabel(l string) bool {
	if l == "" {
		return false
	}
	if strings.HasPrefix(l, "0x") {
		for _, c := range l[2:] {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for _, c := range l {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseIPv4Any parses the inet_aton forms: a, a.b, a.b.c, a.b.c.d where the
// last part fills the remaining bytes and every part is decimal, octal or
// hex.
func parseIPv4Any(parts []string) (netip.Addr, bool) {
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals []uint64
	for _, p := range parts {
		if !numericLabel(p) {
			return netip.Addr{}, false
		}
		base, digits := 10, p
		switch {
		case strings.HasPrefix(p, "0x"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals = append(vals, v)
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (24 - 8*i)
	}
	last := vals[len(vals)-1]
	if rest := 8 * (5 - len(vals)); rest < 32 && last >= 1<<rest {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// blocked4 are the IPv4 ranges the proxy never connects to: this network,
// private, shared (CGNAT), loopback, link-local (cloud metadata services),
// IETF protocol assignments, documentation, 6to4 relays, benchmarking,
// multicast, reserved and broadcast.
var blocked4 = []struct {
	p    netip.Prefix
	kind string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "\"this network\""},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (cloud metadata)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved or broadcast"},
}

var (
	global6 = netip.MustParsePrefix("2000::/3")
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4  = netip.MustParsePrefix("2002::/16")
	// blocked6 are the parts of 2000::/3 that are not the open internet.
	blocked6 = []struct {
		p    netip.Prefix
		kind string
	}{
		{netip.MustParsePrefix("2001::/23"), "IETF protocol assignment (Teredo and others)"},
		{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
		{netip.MustParsePrefix("3fff::/20"), "documentation"},
	}
)

// AddrError says why the proxy refuses an address.
type AddrError struct {
	Addr netip.Addr
	Kind string
}

func (e *AddrError) Error() string {
	return fmt.Sprintf("%s is a %s address", e.Addr, e.Kind)
}

// CheckAddr returns nil when the proxy may connect to ip: a public unicast
// address, or one inside a range the operator allowed. IPv4-mapped and
// NAT64 or 6to4 addresses are judged by the IPv4 address they carry.
func CheckAddr(ip netip.Addr, allowed []netip.Prefix) error {
	if !ip.IsValid() {
		return &AddrError{Addr: ip, Kind: "invalid"}
	}
	if ip.Zone() != "" {
		return &AddrError{Addr: ip, Kind: "zoned (link-local)"}
	}
	for _, p := range allowed {
		if p.Contains(ip) || p.Contains(ip.Unmap()) {
			return nil
		}
	}
	orig := ip
	ip = ip.Unmap()
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64.Contains(ip):
			ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		case sixTo4.Contains(ip):
			ip = netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
		}
	}
	if ip.Is4() {
		for _, b := range blocked4 {
			if b.p.Contains(ip) {
				return &AddrError{Addr: orig, Kind: b.kind}
			}
		}
		return nil
	}
	switch {
	case ip.IsLoopback():
		return &AddrError{Addr: orig, Kind: "loopback"}
	case ip.IsLinkLocalUnicast():
		return &AddrError{Addr: orig, Kind: "link-local"}
	case ip.IsMulticast():
		return &AddrError{Addr: orig, Kind: "multicast"}
	case ip.IsPrivate():
		return &AddrError{Addr: orig, Kind: "private (unique local)"}
	case !global6.Contains(ip):
		return &AddrError{Addr: orig, Kind: "reserved or non-global"}
	}
	for _, b := range blocked6 {
		if b.p.Contains(ip) {
			return &AddrError{Addr: orig, Kind: b.kind}
		}
	}
	return nil
}
