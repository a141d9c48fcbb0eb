package mcp

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of the connection limits.
const (
	// DefaultConnsPerClient is how many connections (or, through a
	// trusted proxy, requests in flight) one client address may hold
	// before it authenticates. A browser opens six.
	DefaultConnsPerClient = 64
	// DefaultConnsPerUser is how many one authenticated user may hold:
	// an MCP client needs one per call in flight.
	DefaultConnsPerUser = 64
)

// ConnLimits configure a ConnLimiter. A limit of 0 means none.
type ConnLimits struct {
	// PerAddress bounds what one client address holds before it
	// authenticates.
	PerAddress int
	// PerUser bounds what one authenticated user holds.
	PerUser int
	// TrustedProxies are the networks of reverse proxies: their
	// connections are everyone's, so their requests are charged to the
	// address in X-Forwarded-For (read from them only) and to the user.
	TrustedProxies []*net.IPNet
}

// ConnLimiter bounds connections per client address until they
// authenticate, and per user after: behind a reverse proxy (or a NAT)
// every client shares one address, so a cap per address alone would let
// one user's connections deny all the others, and a cap high enough for
// all of them would let one address take every descriptor.
//
// A direct connection is charged to its address from the moment it is
// accepted (over the limit it is answered 503 and closed before its
// request is read, so stalled connections without a token cannot take
// the server's descriptors); its first authenticated request moves it to
// its user, where it stays until it closes. A trusted proxy's connections
// carry many clients' requests: each request is charged instead, to the
// client address the proxy names while it is not authenticated, then to
// its user until it ends.
type ConnLimiter struct {
	net.Listener
	limits ConnLimits

	// mu protects open.
	mu   sync.Mutex
	open map[string]int // "addr <ip>" or "user <name>" -> connections or requests held
}

// NewConnLimiter wraps ln; serve with its Handler and ConnContext.
func NewConnLimiter(ln net.Listener, limits ConnLimits) *ConnLimiter {
	return &ConnLimiter{Listener: ln, limits: limits, open: map[string]int{}}
}

// ParseTrustedProxies parses addresses and CIDR networks.
func ParseTrustedProxies(list []string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, s := range list {
		for _, item := range strings.Split(s, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			if !strings.Contains(item, "/") {
				ip := net.ParseIP(item)
				if ip == nil {
					return nil, fmt.Errorf("trusted proxy %q is neither an IP address nor a CIDR network (such as 10.0.0.0/8)", item)
				}
				bits := 128
				if ip.To4() != nil {
					ip, bits = ip.To4(), 32
				}
				out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
				continue
			}
			_, n, err := net.ParseCIDR(item)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q is neither an IP address nor a CIDR network (such as 10.0.0.0/8)", item)
			}
			out = append(out, n)
		}
	}
	return out, nil
}

func (l *ConnLimiter) trusted(ip net.IP) bool {
	for _, n := range l.limits.TrustedProxies {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// take charges one to key, or reports false when key holds its limit.
func (l *ConnLimiter) take(key string, limit int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if limit > 0 && l.open[key] >= limit {
		return false
	}
	l.open[key]++
	return true
}

func (l *ConnLimiter) give(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}

// Accept returns the next connection within its address's limit. A
// trusted proxy's connections are not charged here.
func (l *ConnLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c.RemoteAddr())
		lc := &limitedConn{Conn: c, l: l, proxy: ip != nil && l.trusted(ip)}
		if !lc.proxy {
			lc.key = "addr " + ipText(ip, c.RemoteAddr())
			if !l.take(lc.key, l.limits.PerAddress) {
				go refuse(c, fmt.Sprintf("too many connections from your address (the limit is %d before a client authenticates): "+
					"close idle ones or raise --max-conns-per-client", l.limits.PerAddress))
				continue
			}
		}
		return lc, nil
	}
}

type connKey struct{}

// ConnContext puts the connection in its requests' context (the
// http.Server's ConnContext).
func (l *ConnLimiter) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, &charge{conn: lc})
	}
	return ctx
}

// charge is what one request of a connection is charged to.
type charge struct {
	conn *limitedConn
	// mu protects key: the request's own charge (a proxied request's),
	// "" when its connection carries the charge.
	mu  sync.Mutex
	key string
}

// Handler charges each request of a trusted proxy to the client address
// in its X-Forwarded-For, while it is not authenticated (PerUser moves
// the charge to its user), and gives the request that address as its
// RemoteAddr; other requests pass as they came.
func (l *ConnLimiter) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parent, _ := r.Context().Value(connKey{}).(*charge)
		if parent == nil || !parent.conn.proxy {
			next.ServeHTTP(w, r)
			return
		}
		client := l.forwardedFor(r)
		ch := &charge{conn: parent.conn, key: "addr " + client}
		if !l.take(ch.key, l.limits.PerAddress) {
			w.Header().Set("Connection", "close")
			http.Error(w, fmt.Sprintf("too many requests in flight from your address (the limit is %d before a client authenticates): "+
				"wait for some to end or ask the operator to raise --max-conns-per-client", l.limits.PerAddress), http.StatusServiceUnavailable)
			return
		}
		defer func() {
			ch.mu.Lock()
			defer ch.mu.Unlock()
			if ch.key != "" {
				l.give(ch.key)
			}
		}()
		// Behind a trusted proxy the client is the forwarded address:
		// what comes after (the console's sign-in limits, logs) sees it
		// as the request's remote address, not the proxy's.
		r = r.WithContext(context.WithValue(r.Context(), connKey{}, ch))
		r.RemoteAddr = net.JoinHostPort(client, "0")
		next.ServeHTTP(w, r)
	})
}

// forwardedFor returns the client address of a trusted proxy's request:
// the last address in X-Forwarded-For that is not itself a trusted proxy
// (each proxy appends the address it got the request from, and only the
// entries that trusted proxies added can be believed), or the proxy's own
// address when there is none.
func (l *ConnLimiter) forwardedFor(r *http.Request) string {
	var hops []string
	for _, h := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(h, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		ip := net.ParseIP(strings.TrimSpace(hops[i]))
		if ip == nil {
			break // not an address: nothing before it can be trusted
		}
		if !l.trusted(ip) {
			return ip.String()
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// PerUser moves what a request is charged to from its address to its
// user (in the context: place it behind authentication), or answers 503
// when the user holds its limit. A direct connection is charged to the
// first user that authenticates on it, for as long as it stays open.
func (l *ConnLimiter) PerUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ch, _ := r.Context().Value(connKey{}).(*charge)
		user := UserFrom(r.Context())
		if ch == nil || user == "" {
			next.ServeHTTP(w, r)
			return
		}
		key := "user " + user
		if ch.conn.proxy {
			ch.mu.Lock()
			moved := ch.key == key || l.take(key, l.limits.PerUser)
			if moved && ch.key != key {
				if ch.key != "" {
					l.give(ch.key)
				}
				ch.key = key
			}
			ch.mu.Unlock()
			if !moved {
				// Closing answers at once: net/http would otherwise read
				// the rest of the body first (the proxy opens another).
				w.Header().Set("Connection", "close")
				l.refuseUser(w, user)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		c := ch.conn
		c.mu.Lock()
		moved := c.user || c.closed
		if !moved {
			if moved = l.take(key, l.limits.PerUser); moved {
				l.give(c.key)
				c.key, c.user = key, true
			}
		}
		c.mu.Unlock()
		if !moved {
			w.Header().Set("Connection", "close")
			l.refuseUser(w, user)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (l *ConnLimiter) refuseUser(w http.ResponseWriter, user string) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, fmt.Sprintf("too many connections for user %s (the limit is %d): close idle ones, "+
		"or ask the operator to raise --max-conns-per-user", user, l.limits.PerUser), http.StatusServiceUnavailable)
}

// refuse answers an over-limit connection without reading its request.
func refuse(c net.Conn, msg string) {
	defer c.Close()
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	msg += "\n"
	_, _ = c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\nRetry-After: 1\r\n" +
		"Content-Length: " + strconv.Itoa(len(msg)) + "\r\n\r\n" + msg))
}

func remoteIP(a net.Addr) net.IP {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP
	}
	if h, _, err := net.SplitHostPort(a.String()); err == nil {
		return net.ParseIP(h)
	}
	return nil
}

func ipText(ip net.IP, a net.Addr) string {
	if ip != nil {
		return ip.String()
	}
	return a.String()
}

// limitedConn gives its charge back when closed.
type limitedConn struct {
	net.Conn
	l     *ConnLimiter
	proxy bool // from a trusted proxy: its requests are charged, not it

	// mu protects the fields below.
	mu     sync.Mutex
	key    string // what the connection is charged to; "" for a proxy's
	user   bool   // key is a user's
	closed bool   // the charge was given back
}

func (c *limitedConn) Close() error {
	c.mu.Lock()
	key := c.key
	if c.closed {
		key = ""
	}
	c.closed = true
	c.mu.Unlock()
	if key != "" {
		c.l.give(key)
	}
	return c.Conn.Close()
}
