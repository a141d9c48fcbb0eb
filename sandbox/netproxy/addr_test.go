package netproxy

import (
	"net/netip"
	"testing"
)

func TestParseHostNotations(t *testing.T) {
	for _, c := range []struct {
		in, want string // want "" means refused
	}{
		{"example.com", "example.com"},
		{"Example.COM.", "example.com"},
		{"127.0.0.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"0x7f.0.0.1", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"127.0.0.1.", "127.0.0.1"},
		{"169.254.43518", "169.254.169.254"},
		{"0xa9fea9fe", "169.254.169.254"},
		{"0", "0.0.0.0"},
		{"[::1]", "::1"},
		{"[::ffff:127.0.0.1]", "::ffff:127.0.0.1"},
		{"[::ffff:7f00:1]", "::ffff:127.0.0.1"},
		{"::1", "::1"},
		{"[fe80::1%eth0]", ""},
		{"[fe80::1%25eth0]", ""},
		{"fe80::1%eth0", ""},
		{"127.0.0.1%2f", ""},
		{"256.0.0.1", ""},
		{"1.2.3.4.5", ""},
		{"0x100.0.0.1", ""},
		{"08.0.0.1", ""},
		{"example.123", ""},
		{"example..com", ""},
		{"exa mple.com", ""},
		{"bücher.de", ""},
		{"xn--bcher-kva.de", "xn--bcher-kva.de"},
		{"", ""},
		{".", ""},
	} {
		h, err := ParseHost(c.in)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("ParseHost(%q) = %v, want an error", c.in, h)
		case c.want != "" && err != nil:
			t.Errorf("ParseHost(%q): %v, want %s", c.in, err, c.want)
		case c.want != "" && h.String() != c.want:
			t.Errorf("ParseHost(%q) = %s, want %s", c.in, h, c.want)
		}
	}
}

func TestCheckAddr(t *testing.T) {
	refused := []string{
		"0.0.0.0", "0.1.2.3", "10.0.0.1", "100.64.0.1", "100.127.255.254", "127.0.0.1", "127.255.255.255",
		"169.254.169.254", "172.16.0.1", "172.31.255.255", "192.0.0.170", "192.0.2.1", "192.168.1.1",
		"198.18.0.1", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
		"::", "::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "::127.0.0.1",
		"fe80::1", "fc00::1", "fd00:ec2::254", "ff02::1", "fec0::1", "64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1",
		"2002:7f00:1::", "2002:a9fe:a9fe::1", "2001::1", "2001:db8::1", "100::1", "64:ff9b:1::1",
	}
	for _, s := range refused {
		if err := CheckAddr(netip.MustParseAddr(s), nil); err == nil {
			t.Errorf("CheckAddr(%s) = nil, want refused", s)
		}
	}
	if err := CheckAddr(netip.MustParseAddr("fe80::1%eth0"), nil); err == nil {
		t.Error("a zoned address was allowed")
	}
	for _, s := range []string{"93.184.216.34", "140.82.112.3", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8",
		"64:ff9b::808:808", "2002:808:808::1", "100.128.0.1", "172.32.0.1"} {
		if err := CheckAddr(netip.MustParseAddr(s), nil); err != nil {
			t.Errorf("CheckAddr(%s) = %v, want allowed", s, err)
		}
	}
	allowed := []netip.Prefix{netip.MustParsePrefix("10.1.2.0/24")}
	if err := CheckAddr(netip.MustParseAddr("10.1.2.3"), allowed); err != nil {
		t.Errorf("an operator-allowed range was refused: %v", err)
	}
	if err := CheckAddr(netip.MustParseAddr("10.1.3.3"), allowed); err == nil {
		t.Error("an address outside the operator's range was allowed")
	}
}

func TestRules(t *testing.T) {
	rules, err := Expand([]string{"github", "registry.npmjs.org", "internal.example:8443", "[2606:4700::1111]:443"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host string
		port uint16
		want bool
	}{
		{"github.com", 443, true},
		{"api.github.com", 443, true},
		{"objects.githubusercontent.com", 443, true},
		{"evilgithub.com", 443, false},
		{"github.com.evil.com", 443, false},
		{"registry.npmjs.org", 80, true},
		{"registry.npmjs.org", 22, false},
		{"internal.example", 8443, true},
		{"internal.example", 443, false},
		{"2606:4700::1111", 443, true},
		{"2606:4700::1111", 80, false},
	} {
		h, err := ParseHost(c.host)
		if err != nil {
			t.Fatal(err)
		}
		if got := allows(rules, h, c.port); got != c.want {
			t.Errorf("allows(%s:%d) = %v, want %v", c.host, c.port, got, c.want)
		}
	}
	for _, bad := range []string{"*", "*.com", "nosuchpreset", "a.*.com", "*.1.2.3.4", "example.com:0", "example.com:99999", "localhost"} {
		if _, err := Expand([]string{bad}, nil); err == nil {
			t.Errorf("Expand(%q) accepted", bad)
		}
	}
}
