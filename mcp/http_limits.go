package mcp

import (
	"net"
	"strconv"
	"sync"
	"time"
)

// DefaultConnsPerClient is how many connections one client address may hold
// open at once. An MCP client needs a few (one per call in flight); a
// browser six.
const DefaultConnsPerClient = 64

// LimitConnsPerClient returns a listener that holds at most max connections
// per client IP address. Over the limit, a new connection is answered 503
// and closed at once, so one address cannot take every descriptor the
// server has (260 stalled connections without a token did) and /healthz and
// other clients keep being served.
func LimitConnsPerClient(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		max = DefaultConnsPerClient
	}
	return &connLimiter{Listener: ln, max: max, open: map[string]int{}}
}

type connLimiter struct {
	net.Listener
	max int

	// mu protects open.
	mu   sync.Mutex
	open map[string]int // client IP -> connections open
}

// Accept returns the next connection within its client's limit.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := clientIP(c.RemoteAddr())
		l.mu.Lock()
		over := l.open[ip] >= l.max
		if !over {
			l.open[ip]++
		}
		l.mu.Unlock()
		if over {
			go refuse(c, l.max)
			continue
		}
		return &limitedConn{Conn: c, release: sync.OnceFunc(func() { l.release(ip) })}, nil
	}
}

func (l *connLimiter) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

// refuse answers an over-limit connection without reading its request.
func refuse(c net.Conn, max int) {
	defer c.Close()
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	msg := "too many connections from your address (the limit is " + strconv.Itoa(max) + "): close idle ones or raise --max-conns-per-client\n"
	_, _ = c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\nRetry-After: 1\r\n" +
		"Content-Length: " + strconv.Itoa(len(msg)) + "\r\n\r\n" + msg))
}

func clientIP(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	if h, _, err := net.SplitHostPort(a.String()); err == nil {
		return h
	}
	return a.String()
}

// limitedConn gives its slot back when closed.
type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	c.release()
	return c.Conn.Close()
}
