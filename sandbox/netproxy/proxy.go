// Package netproxy is warren's egress proxy: the only way out of a jail in
// allowlist mode. Each session's jail reaches it through a forwarder on the
// jail's loopback (see RunForwarder); the proxy serves plain HTTP requests
// and CONNECT tunnels (no TLS interception) to hosts the session's
// allowlist names, resolves names itself, and never connects to loopback,
// private, link-local (cloud metadata), CGNAT, multicast or reserved
// addresses, whatever notation or DNS answer leads there. Every decision
// is logged with its bytes; a refused request gets a 403 that says why and
// how to allow it.
package netproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/sessions/bound"
)

// MaxHeaderBytes caps a request's line and headers as the proxy reads
// them: a CONNECT line names a host of at most 253 bytes, and a plain
// request's headers are a client's few. A request past it is refused
// (431) before it is read whole, so a jail cannot make the server hold,
// log or store a megabyte of target.
const MaxHeaderBytes = 8 << 10

// Resolver looks names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer opens upstream connections; *net.Dialer is one.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Options configure a Proxy. The zero value is usable.
type Options struct {
	// Resolver resolves names; nil means net.DefaultResolver.
	Resolver Resolver
	// Dialer connects to checked addresses; nil means a net.Dialer with a
	// 10 s timeout.
	Dialer Dialer
	// Hosts pins names to addresses the operator vouches for (a mirror on
	// the LAN): they are resolved without DNS and exempt from the address
	// checks. A session must still allow the name.
	Hosts map[string]netip.Addr
	// AllowRanges are address ranges the operator allows although they
	// are private or local.
	AllowRanges []netip.Prefix
	// Presets name groups of hosts; nil means DefaultPresets. Only used
	// for the hint in a refusal.
	Presets map[string][]string
	// MaxConns caps a session's open upstream connections; 0 means 64.
	MaxConns int
	// MaxBytes caps the bytes a session moves through the proxy, both
	// ways, while this proxy runs; 0 means no cap.
	MaxBytes int64
	// IdleTimeout closes a tunnel with no traffic either way for this
	// long; 0 means 5 minutes.
	IdleTimeout time.Duration
	// LogSize is how many decisions each session keeps; 0 means 200.
	LogSize int
	// OnDecision, when set, sees every decision (for logs and storage). It
	// runs on the connection's goroutine: it must not block.
	OnDecision func(Decision)
	// Hint, when set, is appended to a refusal's explanation: how to
	// change the allowlist from where the user sits.
	Hint string
}

// Proxy serves the jails of many sessions, each with its own allowlist,
// counters and log.
type Proxy struct {
	opts Options

	mu       sync.Mutex // guards sessions
	sessions map[string]*Session
}

// New returns a proxy with opts' defaults filled in.
func New(opts Options) *Proxy {
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if opts.Dialer == nil {
		opts.Dialer = &net.Dialer{Timeout: 10 * time.Second}
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 64
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 5 * time.Minute
	}
	if opts.LogSize <= 0 {
		opts.LogSize = 200
	}
	return &Proxy{opts: opts, sessions: map[string]*Session{}}
}

// Session returns the proxy's state for session id, creating it (with an
// empty allowlist: nothing allowed) on first use.
func (p *Proxy) Session(id string) *Session {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.sessions[id]; s != nil {
		return s
	}
	s := &Session{id: id, p: p, log: newRing(p.opts.LogSize), conns: map[net.Conn]struct{}{}}
	s.allow.Store(&[]Rule{})
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: p.opts.IdleTimeout,
		MaxHeaderBytes: MaxHeaderBytes, ErrorLog: discardLog}
	s.tr = &http.Transport{
		Proxy:                 nil, // never chain through the server's own proxy settings
		DialContext:           s.dialTransport,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
		ForceAttemptHTTP2:     false,
	}
	s.ln = newConnListener()
	go s.srv.Serve(s.ln) //nolint:errcheck // ends with Close
	p.sessions[id] = s
	return s
}

// Lookup returns session id's state, or nil.
func (p *Proxy) Lookup(id string) *Session {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sessions[id]
}

// Remove closes session id's connections and forgets it.
func (p *Proxy) Remove(id string) {
	p.mu.Lock()
	s := p.sessions[id]
	delete(p.sessions, id)
	p.mu.Unlock()
	if s != nil {
		s.close()
	}
}

// Close closes every session.
func (p *Proxy) Close() {
	p.mu.Lock()
	all := p.sessions
	p.sessions = map[string]*Session{}
	p.mu.Unlock()
	for _, s := range all {
		s.close()
	}
}

// Session is one session's view of the proxy: its allowlist, counters,
// decision log and the connections it has open.
type Session struct {
	id    string
	p     *Proxy
	allow atomic.Pointer[[]Rule]
	srv   *http.Server
	tr    *http.Transport
	ln    *connListener
	log   *ring

	open     atomic.Int64 // upstream connections open
	clients  atomic.Int64 // client connections open
	bytes    atomic.Int64 // bytes moved, both ways, upstream side
	closed   atomic.Bool
	connsMu  sync.Mutex
	conns    map[net.Conn]struct{} // upstream connections, closed with the session
	attached sync.WaitGroup
}

// SetAllow replaces the session's allowlist. New requests and tunnels see
// it at once; open tunnels keep going.
func (s *Session) SetAllow(rules []Rule) {
	cp := append([]Rule(nil), rules...)
	s.allow.Store(&cp)
}

// Allow returns the session's allowlist.
func (s *Session) Allow() []Rule { return append([]Rule(nil), *s.allow.Load()...) }

// Bytes returns the bytes the session moved through the proxy.
func (s *Session) Bytes() int64 { return s.bytes.Load() }

// OpenConns returns the session's open upstream connections.
func (s *Session) OpenConns() int64 { return s.open.Load() }

// Log returns the session's recent decisions, oldest first.
func (s *Session) Log() []Decision { return s.log.list() }

// maxClients caps the client connections a jail may hold open at once;
// past it new ones are closed at once.
func (s *Session) maxClients() int64 { return int64(4*s.p.opts.MaxConns) + 16 }

// ServeConn serves one client connection from the session's jail. It
// returns at once; the connection is served and closed in the background.
func (s *Session) ServeConn(c net.Conn) {
	if s.closed.Load() || s.clients.Load() >= s.maxClients() {
		c.Close()
		return
	}
	s.clients.Add(1)
	s.ln.push(&clientConn{Conn: c, s: s})
}

func (s *Session) close() {
	if s.closed.Swap(true) {
		return
	}
	s.srv.Close()
	s.tr.CloseIdleConnections()
	s.connsMu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.connsMu.Unlock()
}

// clientConn counts the jail's open client connections.
type clientConn struct {
	net.Conn
	s    *Session
	once sync.Once
}

func (c *clientConn) Close() error {
	c.once.Do(func() { c.s.clients.Add(-1) })
	return c.Conn.Close()
}

// CloseWrite lets http.Server close its side of a connection it refuses
// (a request over MaxHeaderBytes) and linger before closing: without it
// the client, still sending, gets a reset instead of the refusal.
func (c *clientConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// connListener hands connections pushed by ServeConn to http.Server.
type connListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnListener() *connListener {
	return &connListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *connListener) push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error { l.once.Do(func() { close(l.done) }); return nil }

func (l *connListener) Addr() net.Addr { return &net.UnixAddr{Name: "warren-proxy", Net: "unix"} }

// refusal is a decision not to connect, with what to tell the client.
type refusal struct {
	status int
	reason string
}

func (r *refusal) Error() string { return r.reason }

// target parses host:port of a request, with defPort when it has none.
func target(hostport string, defPort uint16) (Host, uint16, error) {
	host, port := hostport, defPort
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return Host{}, 0, fmt.Errorf("port %q is not a number from 1 to 65535", bound.String(p, 16))
		}
		host, port = h, uint16(n)
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
	}
	if port == 0 {
		return Host{}, 0, fmt.Errorf("%q has no port", shown(hostport))
	}
	h, err := ParseHost(host)
	return h, port, err
}

// decide checks host:port against the allowlist, resolves it and checks
// every address. It returns the addresses to dial.
func (s *Session) decide(ctx context.Context, h Host, port uint16) ([]netip.Addr, error) {
	if s.closed.Load() {
		return nil, &refusal{http.StatusForbidden, "the session's network was turned off"}
	}
	if !allows(*s.allow.Load(), h, port) {
		return nil, &refusal{http.StatusForbidden, fmt.Sprintf("%s is not in the session's allowlist", hostPort(h, port))}
	}
	if max := s.p.opts.MaxBytes; max > 0 && s.bytes.Load() >= max {
		return nil, &refusal{http.StatusForbidden, fmt.Sprintf("the session moved %d bytes through the proxy, its cap is %d", s.bytes.Load(), max)}
	}
	if s.open.Load() >= int64(s.p.opts.MaxConns) {
		return nil, &refusal{http.StatusTooManyRequests, fmt.Sprintf("the session has %d connections open, its cap is %d", s.open.Load(), s.p.opts.MaxConns)}
	}
	if h.Name == "" {
		if err := CheckAddr(h.IP, s.p.opts.AllowRanges); err != nil {
			return nil, &refusal{http.StatusForbidden, fmt.Sprintf("%s: %v, which warren never connects to", hostPort(h, port), err)}
		}
		return []netip.Addr{h.IP}, nil
	}
	if ip, ok := s.p.opts.Hosts[h.Name]; ok {
		return []netip.Addr{ip}, nil // the operator vouched for this name
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addrs, err := s.p.opts.Resolver.LookupNetIP(ctx, "ip", h.Name)
	if err != nil || len(addrs) == 0 {
		return nil, &refusal{http.StatusBadGateway, fmt.Sprintf("cannot resolve %s: %v", h.Name, err)}
	}
	// One bad address refuses the name: a name that resolves to both a
	// public and a private address is how DNS rebinding starts.
	for _, a := range addrs {
		if err := CheckAddr(a, s.p.opts.AllowRanges); err != nil {
			return nil, &refusal{http.StatusForbidden, fmt.Sprintf("%s resolves to %v, which warren never connects to", h.Name, err)}
		}
	}
	return addrs, nil
}

// dial connects to the first address that answers and counts the
// connection against the session.
func (s *Session) dial(ctx context.Context, addrs []netip.Addr, port uint16) (net.Conn, netip.Addr, error) {
	var errs []error
	for _, a := range addrs {
		c, err := s.p.opts.Dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(a, port).String())
		if err == nil {
			return s.track(c), a, nil
		}
		errs = append(errs, err)
	}
	return nil, netip.Addr{}, errors.Join(errs...)
}

// dialTransport is the plain-HTTP transport's dialer: the request was
// decided already, but the transport dials by name, so it is decided
// again here and only checked addresses are dialed.
func (s *Session) dialTransport(ctx context.Context, _, addr string) (net.Conn, error) {
	h, port, err := target(addr, 80)
	if err != nil {
		return nil, err
	}
	addrs, err := s.decide(ctx, h, port)
	if err != nil {
		return nil, err
	}
	c, _, err := s.dial(ctx, addrs, port)
	return c, err
}

func hostPort(h Host, port uint16) string {
	return net.JoinHostPort(h.String(), strconv.Itoa(int(port)))
}
