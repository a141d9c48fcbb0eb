package netproxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox/netproxy"
)

// listen serves sess on a loopback listener, standing in for the jail's
// forwarder, and returns its address.
func listen(t testing.TB, sess *netproxy.Session) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			sess.ServeConn(c)
		}
	}()
	return ln.Addr().String()
}

func proxyClient(addr string) *http.Client {
	u, _ := url.Parse("http://" + addr)
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), MaxIdleConnsPerHost: 64}}
}

// openTunnel opens a CONNECT tunnel to target through the proxy.
func openTunnel(t testing.TB, proxy, target string) (net.Conn, *bufio.Reader, int) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	return c, br, resp.StatusCode
}

func TestConnectionAndByteCaps(t *testing.T) {
	w := newWorld(t)
	big := strings.Repeat("x", 64<<10)
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, big) })}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	defer srv.Close()
	_, bigPort, _ := net.SplitHostPort(ln.Addr().String())

	p := w.proxy(netproxy.Options{MaxConns: 2, MaxBytes: 200 << 10})
	defer p.Close()
	s := p.Session("s-caps")
	s.SetAllow(rules(t, "allowed.test:"+w.httpPort, "allowed.test:"+bigPort))
	addr := listen(t, s)

	// Two tunnels are the cap: the third is refused with 429.
	t1, _, c1 := openTunnel(t, addr, "allowed.test:"+w.httpPort)
	t2, _, c2 := openTunnel(t, addr, "allowed.test:"+w.httpPort)
	_, _, c3 := openTunnel(t, addr, "allowed.test:"+w.httpPort)
	if c1 != 200 || c2 != 200 || c3 != http.StatusTooManyRequests {
		t.Fatalf("tunnel statuses %d %d %d, want 200 200 429", c1, c2, c3)
	}
	t1.Close()
	t2.Close()
	waitUntil(t, func() bool { return s.OpenConns() == 0 })

	// 64 KiB per request; the cap of 200 KiB stops the fourth or fifth.
	client := proxyClient(addr)
	refused := 0
	for i := 0; i < 6; i++ {
		resp, err := client.Get("http://allowed.test:" + bigPort + "/")
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusForbidden && strings.Contains(string(body), "cap") {
			refused++
		}
	}
	if refused == 0 || s.Bytes() > 300<<10 {
		t.Fatalf("byte cap: %d refused, %d bytes moved", refused, s.Bytes())
	}
}

func TestIdleTunnelsAreClosed(t *testing.T) {
	w := newWorld(t)
	p := w.proxy(netproxy.Options{IdleTimeout: 200 * time.Millisecond})
	defer p.Close()
	s := p.Session("s-idle")
	s.SetAllow(rules(t, "allowed.test:"+w.httpPort))
	c, br, code := openTunnel(t, listen(t, s), "allowed.test:"+w.httpPort)
	if code != 200 {
		t.Fatalf("CONNECT: %d", code)
	}
	defer c.Close()
	// Nothing is sent: the proxy must close the tunnel by itself.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("idle tunnel still open: %v", err)
	}
	waitUntil(t, func() bool { return s.OpenConns() == 0 })
}

func waitUntil(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkProxy compares a request through the proxy with the same
// request straight to the loopback server (both keep connections alive),
// and reports the added latency and requests per second.
func BenchmarkProxy(b *testing.B) {
	w := newWorld(b)
	p := w.proxy(netproxy.Options{})
	defer p.Close()
	s := p.Session("s-bench")
	s.SetAllow(rules(b, "allowed.test:"+w.httpPort))
	addr := listen(b, s)
	get := func(c *http.Client, u string) {
		resp, err := c.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	direct := &http.Client{Transport: &http.Transport{}}
	proxied := proxyClient(addr)
	measure := func(c *http.Client, u string) time.Duration {
		start := time.Now()
		for i := 0; i < b.N; i++ {
			get(c, u)
		}
		return time.Since(start) / time.Duration(b.N)
	}
	get(direct, w.http.URL)
	get(proxied, "http://allowed.test:"+w.httpPort+"/")
	b.ResetTimer()
	d := measure(direct, w.http.URL)
	pr := measure(proxied, "http://allowed.test:"+w.httpPort+"/")
	b.ReportMetric(float64(d.Microseconds()), "direct-µs/req")
	b.ReportMetric(float64(pr.Microseconds()), "proxied-µs/req")
	b.ReportMetric(float64((pr - d).Microseconds()), "added-µs/req")
	b.ReportMetric(float64(time.Second/pr), "proxied-req/s")
}

// BenchmarkTunnelMemory opens 100 CONNECT tunnels and reports the heap and
// goroutines they hold.
func BenchmarkTunnelMemory(b *testing.B) {
	w := newWorld(b)
	p := w.proxy(netproxy.Options{MaxConns: 200})
	defer p.Close()
	s := p.Session("s-mem")
	s.SetAllow(rules(b, "allowed.test:"+w.httpPort))
	addr := listen(b, s)
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		var conns []net.Conn
		for j := 0; j < 100; j++ {
			c, br, code := openTunnel(b, addr, "allowed.test:"+w.httpPort)
			if code != 200 {
				b.Fatalf("tunnel %d: %d", j, code)
			}
			// One request through it: the tunnel is spliced, not just dialed.
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			conns = append(conns, c)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/100/1024, "KiB-heap/tunnel")
		b.ReportMetric(float64(after.StackInuse-before.StackInuse)/100/1024, "KiB-stack/tunnel")
		b.ReportMetric(float64(runtime.NumGoroutine()-g0)/100, "goroutines/tunnel")
		for _, c := range conns {
			c.Close()
		}
		waitUntil(b, func() bool { return s.OpenConns() == 0 })
	}
}
