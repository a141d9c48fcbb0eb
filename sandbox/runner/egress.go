package runner

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Egress of a runner in a pod. A local jail's runner hands each connection
// of its loopback to warren's proxy over a socket pair (Forward); a pod has
// no socket to the server's host, so its runner opens a connection of its
// own to warren's proxy for each one, over TLS 1.3 with its certificate:
// the certificate, issued by warren's authority for the session, is what
// tells warren's proxy whose allowlist applies. Nothing the pod sends in
// the clear names the session.

// EgressProxyName is the name warren's egress proxy's certificate is
// issued for; the runner accepts no other (sandbox/kube issues it).
const EgressProxyName = "warren-egress-proxy"

// Bounds of the egress forwarder: a pod's processes can open connections
// without end, and each one here is a goroutine, two buffers and a
// connection to warren.
const (
	// EgressMaxConns caps the connections forwarded at once; past it a
	// new one is closed at once (warren's proxy caps a session's upstream
	// connections lower still).
	EgressMaxConns = 256
	// egressDialTimeout bounds the connection to warren's proxy and its
	// handshake.
	egressDialTimeout = 10 * time.Second
	// egressReadSize is the most one read moves from either side.
	egressReadSize = 32 << 10
)

// EgressTLS is the runner's side of a connection to warren's proxy: its
// own certificate (the one it serves the server with) as the client's,
// and only a proxy whose certificate the authority in ClientCA issued for
// EgressProxyName.
func (f TLSFiles) EgressTLS() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("the runner's certificate: %w", err)
	}
	pem, err := os.ReadFile(f.ClientCA)
	if err != nil {
		return nil, fmt.Errorf("warren's certificate authority: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("warren's certificate authority %s holds no PEM certificate", f.ClientCA)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    pool,
		ServerName: EgressProxyName,
		// The runner's certificate is a server certificate: offered as is,
		// whatever the proxy's request says (the proxy checks it).
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil },
	}, nil
}

// ForwardTLS is the egress forwarder of a runner in a pod: it listens on
// listen, a loopback address (the port the session's HTTP_PROXY names),
// calls ready, and forwards each accepted connection to warren's proxy at
// proxy over its own TLS connection made with cfg. It returns when the
// listener fails.
func ForwardTLS(listen, proxy string, cfg *tls.Config, ready func()) error {
	host, _, err := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		// On any other address the pod's network could use the
		// session's allowlist.
		return fmt.Errorf("egress forwarder: %q is not a loopback address and port (127.0.0.1:3128)", listen)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("egress forwarder: listen on %s: %w", listen, err)
	}
	defer ln.Close()
	if ready != nil {
		ready()
	}
	slots := make(chan struct{}, EgressMaxConns)
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("egress forwarder: accept: %w", err)
			}
			// Out of descriptors, or a connection reset before it was
			// accepted: the next ones may do, after a pause.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			c.Close()
			continue
		}
		go func() {
			defer func() { <-slots }()
			forwardOne(c, proxy, cfg)
		}()
	}
}

// forwardOne carries one connection to warren's proxy and back, until
// both sides are done.
func forwardOne(c net.Conn, proxy string, cfg *tls.Config) {
	defer c.Close()
	up, err := dialProxy(proxy, cfg)
	if err != nil {
		return
	}
	defer up.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pipe(up, c)
	}()
	pipe(c, up)
	wg.Wait()
}

// dialProxy connects to warren's proxy and completes the handshake
// within egressDialTimeout.
func dialProxy(addr string, cfg *tls.Config) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, egressDialTimeout)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(egressDialTimeout))
	tc := tls.Client(c, cfg)
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return tc, nil
}

// pipe copies src to dst a bounded read at a time, then closes dst's
// writing side so that the other end sees the end of the stream.
func pipe(dst, src net.Conn) {
	buf := make([]byte, egressReadSize)
	_, _ = io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, buf)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		dst.Close()
	}
}
