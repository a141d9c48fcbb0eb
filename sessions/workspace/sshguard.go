package workspace

import (
	"context"
	"net"
	"net/url"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/net/proxy"
)

// A clone or push over ssh with a caller's identity, for a caller who is
// not the operator, is held to the same rule as https: go-git's ssh
// transport dials through the "proxy" named by SSHProxy, which is this
// package's dialer checking the address actually dialed (guardedDial).
// go-git's ssh transport has no other hook for its dial, and the rule
// travels in the proxy URL because that dial gets no context of ours.
const sshGuardScheme = "warren-guard"

func init() {
	proxy.RegisterDialerType(sshGuardScheme, func(u *url.URL, _ proxy.Dialer) (proxy.Dialer, error) {
		return guardDialer{p: netPolicy{public: true, allowLoopback: u.Host == "loopback"}}, nil
	})
}

type guardDialer struct{ p netPolicy }

func (g guardDialer) Dial(network, addr string) (net.Conn, error) {
	return g.DialContext(context.Background(), network, addr)
}

func (g guardDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return guardedDial(context.WithValue(ctx, netPolicyKey{}, g.p), d, network, addr)
}

// SSHProxy returns what go-git's ssh transport is given as its proxy so
// that it reaches only what p allows: nothing for the operator (who may
// reach any address), the public-address dialer for everyone else.
func SSHProxy(p Policy) transport.ProxyOptions {
	if p.Trusted {
		return transport.ProxyOptions{}
	}
	host := "public"
	if p.allowLoopback {
		host = "loopback"
	}
	return transport.ProxyOptions{URL: sshGuardScheme + "://" + host}
}
