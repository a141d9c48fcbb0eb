package netproxy

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/sessions/bound"
)

var discardLog = log.New(io.Discard, "", 0)

// hopHeaders are connection-scoped and never forwarded.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// ServeHTTP serves one request of the session's jail: CONNECT opens a
// tunnel, an absolute http:// URL is forwarded, anything else is told how
// to use a proxy.
func (s *Session) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		s.connect(w, r)
		return
	}
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		msg := "warren: this is the session's egress proxy; send it proxy requests (HTTP_PROXY=http://127.0.0.1:3128), " +
			"absolute http:// URLs or CONNECT for https"
		if r.URL.Scheme != "" && r.URL.Scheme != "http" {
			msg = fmt.Sprintf("warren: the proxy forwards plain requests for http:// only; %s:// goes through CONNECT", r.URL.Scheme)
		}
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	s.forward(w, r)
}

func (s *Session) connect(w http.ResponseWriter, r *http.Request) {
	d := Decision{Time: time.Now(), Session: s.id, Method: r.Method, Target: bound.String(r.Host, bound.Target)}
	h, port, err := target(r.Host, 0)
	if err != nil {
		s.refuse(w, &d, &refusal{http.StatusBadRequest, err.Error()})
		return
	}
	d.Host, d.Port = h.String(), port
	addrs, err := s.decide(r.Context(), h, port)
	if err != nil {
		s.refuse(w, &d, err)
		return
	}
	up, addr, err := s.dial(r.Context(), addrs, port)
	if err != nil {
		s.refuse(w, &d, &refusal{http.StatusBadGateway, fmt.Sprintf("connect to %s: %v", hostPort(h, port), err)})
		return
	}
	d.Addr = addr.String()
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		s.refuse(w, &d, &refusal{http.StatusInternalServerError, "cannot take over the connection"})
		return
	}
	client, rw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		client.Close()
		up.Close()
		return
	}
	// What the client sent after its CONNECT (a TLS hello) is buffered.
	if n := rw.Reader.Buffered(); n > 0 {
		buf, _ := rw.Reader.Peek(n)
		if _, err := up.Write(buf); err != nil {
			client.Close()
			up.Close()
			return
		}
	}
	d.Allowed = true
	up2 := up.(*countConn)
	s.splice(client, up2)
	d.BytesUp, d.BytesDown = up2.written.Load(), up2.read.Load()
	d.Duration = time.Since(d.Time)
	s.record(d)
}

func (s *Session) forward(w http.ResponseWriter, r *http.Request) {
	d := Decision{Time: time.Now(), Session: s.id, Method: bound.String(r.Method, 16), Target: bound.String(r.URL.Host, bound.Target)}
	h, port, err := target(r.URL.Host, 80)
	if err != nil {
		s.refuse(w, &d, &refusal{http.StatusBadRequest, err.Error()})
		return
	}
	d.Host, d.Port = h.String(), port
	if _, err := s.decide(r.Context(), h, port); err != nil {
		s.refuse(w, &d, err)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	for _, k := range hopHeaders {
		out.Header.Del(k)
	}
	resp, err := s.tr.RoundTrip(out)
	if err != nil {
		var ref *refusal
		if errors.As(err, &ref) {
			s.refuse(w, &d, ref)
		} else {
			s.refuse(w, &d, &refusal{http.StatusBadGateway, fmt.Sprintf("request to %s failed: %v", hostPort(h, port), err)})
		}
		return
	}
	defer resp.Body.Close()
	for _, k := range hopHeaders {
		resp.Header.Del(k)
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	n, _ := io.Copy(w, resp.Body)
	d.Allowed = true
	d.BytesDown = n
	d.Status = resp.StatusCode
	d.Duration = time.Since(d.Time)
	s.record(d)
}

// refuse answers a refused request with its explanation and logs it.
func (s *Session) refuse(w http.ResponseWriter, d *Decision, err error) {
	ref, ok := err.(*refusal)
	if !ok {
		ref = &refusal{http.StatusBadGateway, err.Error()}
	}
	d.Reason, d.Status = bound.String(ref.reason, bound.Reason), ref.status
	d.Duration = time.Since(d.Time)
	s.record(*d)
	var b strings.Builder
	fmt.Fprintf(&b, "warren: session %s: refused %s: %s.\n", s.id, d.Target, d.Reason)
	if ref.status == http.StatusForbidden {
		var allowed []string
		for _, r := range *s.allow.Load() {
			allowed = append(allowed, r.String())
		}
		if len(allowed) == 0 {
			allowed = []string{"(nothing)"}
		}
		fmt.Fprintf(&b, "The session's allowlist: %s.\n", strings.Join(allowed, ", "))
		if strings.Contains(ref.reason, "allowlist") {
			fmt.Fprintf(&b, "To allow it, add %q (or a preset: %s) to the session's network allowlist", d.Host,
				strings.Join(presetNames(s.presets()), ", "))
			if s.p.opts.Hint != "" {
				b.WriteString(": " + s.p.opts.Hint)
			}
			b.WriteString(".\n")
		} else if strings.Contains(ref.reason, "never connects") {
			b.WriteString("Local, private and metadata addresses are refused even for allowed names; " +
				"an operator can allow a range in the server's config (network.allow_ranges).\n")
		}
	}
	w.Header().Set("X-Warren-Refused", d.Reason)
	w.Header().Set("Connection", "close")
	http.Error(w, b.String(), ref.status)
}

func (s *Session) presets() map[string][]string {
	if s.p.opts.Presets != nil {
		return s.p.opts.Presets
	}
	return DefaultPresets
}

func (s *Session) record(d Decision) {
	s.log.add(d)
	if fn := s.p.opts.OnDecision; fn != nil {
		fn(d)
	}
}

// countConn counts an upstream connection's bytes against its session and
// cuts it when the session passes its byte cap.
type countConn struct {
	net.Conn
	s             *Session
	read, written atomic.Int64
	once          sync.Once
}

func (s *Session) track(c net.Conn) *countConn {
	cc := &countConn{Conn: c, s: s}
	s.open.Add(1)
	s.connsMu.Lock()
	s.conns[cc] = struct{}{}
	s.connsMu.Unlock()
	if s.closed.Load() {
		cc.Close()
	}
	return cc
}

var errByteCap = errors.New("the session's byte cap is reached")

func (c *countConn) over() bool {
	max := c.s.p.opts.MaxBytes
	return max > 0 && c.s.bytes.Load() > max
}

func (c *countConn) Read(p []byte) (int, error) {
	if c.over() {
		return 0, errByteCap
	}
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	c.s.bytes.Add(int64(n))
	return n, err
}

func (c *countConn) Write(p []byte) (int, error) {
	if c.over() {
		return 0, errByteCap
	}
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	c.s.bytes.Add(int64(n))
	return n, err
}

func (c *countConn) Close() error {
	c.once.Do(func() {
		c.s.open.Add(-1)
		c.s.connsMu.Lock()
		delete(c.s.conns, c)
		c.s.connsMu.Unlock()
	})
	return c.Conn.Close()
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// splice copies both ways until either side ends, the session closes, or
// nothing moved either way for the idle timeout.
func (s *Session) splice(client net.Conn, up *countConn) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	idle := s.p.opts.IdleTimeout
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		bp := bufPool.Get().(*[]byte)
		defer bufPool.Put(bp)
		buf := *bp
		for {
			_ = src.SetReadDeadline(time.Now().Add(idle))
			n, err := src.Read(buf)
			if n > 0 {
				last.Store(time.Now().UnixNano())
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && time.Since(time.Unix(0, last.Load())) < idle {
					continue // the other direction is busy
				}
				break
			}
		}
		// Wake the other direction: half-closed tunnels are not worth
		// keeping for HTTP clients.
		client.Close()
		up.Close()
	}
	wg.Add(2)
	go pipe(up, client)
	go pipe(client, up)
	wg.Wait()
}

// Decision is one request or tunnel the proxy allowed or refused.
type Decision struct {
	Time    time.Time `json:"time"`
	Session string    `json:"session"`
	// Method is CONNECT for a tunnel, or the HTTP method.
	Method string `json:"method"`
	// Target is what the client asked for, as written, cut to
	// bound.Target bytes: the jail wrote it.
	Target string `json:"target"`
	// Host and Port are the normalised target.
	Host    string `json:"host"`
	Port    uint16 `json:"port"`
	Allowed bool   `json:"allowed"`
	// Reason says why a request was refused (at most bound.Reason bytes).
	Reason string `json:"reason,omitempty"`
	// Status is the HTTP status of a refusal or of a forwarded response.
	Status int `json:"status,omitempty"`
	// Addr is the address connected to.
	Addr string `json:"addr,omitempty"`
	// BytesUp and BytesDown count what went to and came from the host.
	BytesUp   int64         `json:"bytes_up"`
	BytesDown int64         `json:"bytes_down"`
	Duration  time.Duration `json:"duration_ns"`
}

// ring keeps the last n decisions.
type ring struct {
	mu   sync.Mutex
	buf  []Decision
	next int
	full bool
}

func newRing(n int) *ring { return &ring{buf: make([]Decision, n)} }

func (r *ring) add(d Decision) {
	r.mu.Lock()
	r.buf[r.next] = d
	r.next = (r.next + 1) % len(r.buf)
	r.full = r.full || r.next == 0
	r.mu.Unlock()
}

func (r *ring) list() []Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]Decision(nil), r.buf[:r.next]...)
	}
	return append(append([]Decision(nil), r.buf[r.next:]...), r.buf[:r.next]...)
}
