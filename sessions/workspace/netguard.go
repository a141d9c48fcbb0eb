package workspace

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// Clones for callers who are not the operator reach public internet
// addresses only. The check runs in the dialer, on the address actually
// connected to after resolution (so a name that resolves to 127.0.0.1,
// or changes between a check and the dial, gains nothing), and again for
// every redirect, which dials anew. Which rule applies travels in the
// request's context: go-git's HTTP transport is installed once for the
// whole process.

type netPolicyKey struct{}

// netPolicy is what the dialer enforces for one clone.
type netPolicy struct {
	public        bool // public addresses only, https only, no proxy
	allowLoopback bool // tests only
}

func withNetPolicy(ctx context.Context, p Policy) context.Context {
	return context.WithValue(ctx, netPolicyKey{}, netPolicy{public: !p.Trusted, allowLoopback: p.allowLoopback})
}

// netPolicyOf returns the clone's rule; without one, the strictest.
func netPolicyOf(ctx context.Context) netPolicy {
	if p, ok := ctx.Value(netPolicyKey{}).(netPolicy); ok {
		return p
	}
	return netPolicy{public: true}
}

// errNotPublic marks a host that resolves to no address or to one that is
// not on the public internet.
var errNotPublic = errors.New("not a public internet address")

// nonPublic are ranges that netip's predicates do not already cover:
// shared (CGNAT), reserved, documentation and benchmarking ranges, and
// IPv6 forms that embed or translate to an IPv4 address chosen by the
// caller (IPv4-compatible, NAT64, 6to4, Teredo).
var nonPublic = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "::/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64",
		"2001::/32", "2001:db8::/32", "2002::/16", "fec0::/10"} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// publicAddr reports whether a is an address on the public internet.
func publicAddr(a netip.Addr, allowLoopback bool) bool {
	a = a.Unmap()
	if allowLoopback && a.IsLoopback() {
		return true
	}
	if !a.IsValid() || a.Zone() != "" || !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() ||
		a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

var resolver = &net.Resolver{}

// guardedDial resolves addr, refuses it unless every address it resolves
// to is public (a name that also resolves to an internal address is
// suspect as a whole), and dials the checked addresses themselves.
func guardedDial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	p := netPolicyOf(ctx)
	if !p.public {
		return d.DialContext(ctx, network, addr)
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", portStr, err)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = resolver.LookupNetIP(ctx, "ip", host); err != nil {
		return nil, fmt.Errorf("%s: %w", host, errNotPublic)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s: %w", host, errNotPublic)
	}
	for _, a := range addrs {
		if !publicAddr(a, p.allowLoopback) {
			return nil, fmt.Errorf("%s: %w", host, errNotPublic)
		}
	}
	var errs []error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// guardedHTTPClient is the HTTP client of every https and http clone.
// roots nil means the system's certificate authorities.
func guardedHTTPClient(roots *x509.CertPool) *http.Client {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy: func(r *http.Request) (*url.URL, error) {
			if netPolicyOf(r.Context()).public {
				return nil, nil // a proxy would dial for us, unchecked
			}
			return http.ProxyFromEnvironment(r)
		},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return guardedDial(ctx, d, network, addr)
		},
		TLSClientConfig:       &tls.Config{RootCAs: roots},
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
		// No connection outlives its clone: a pooled connection would skip
		// the dialer's check for the next clone of another caller.
		DisableKeepAlives: true,
		ForceAttemptHTTP2: true,
	}
	return &http.Client{
		Transport: limitErrorBodies{tr},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			if netPolicyOf(req.Context()).public && req.URL.Scheme != "https" {
				return fmt.Errorf("redirect to %s:// refused: https only", req.URL.Scheme)
			}
			return nil
		},
	}
}

// limitErrorBodies caps what is read of a failed response: go-git reads
// an error body whole into its message.
type limitErrorBodies struct{ http.RoundTripper }

func (l limitErrorBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := l.RoundTripper.RoundTrip(r)
	if err == nil && (res.StatusCode < 200 || res.StatusCode > 299) {
		res.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(res.Body, 4<<10), res.Body}
	}
	return res, err
}

func installGuardedHTTP() {
	t := githttp.NewClient(guardedHTTPClient(nil))
	client.InstallProtocol("https", t)
	client.InstallProtocol("http", t)
}
