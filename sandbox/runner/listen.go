package runner

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
)

// TLSFiles name the runner's certificate and key, and the certificate
// authority whose certificates it accepts from the server: a runner
// reached over a network (in a pod) serves only a server that proves who
// it is, and proves who it is in turn.
type TLSFiles struct {
	Cert, Key, ClientCA string
}

// ServerTLS builds the runner's TLS configuration: TLS 1.3 only, the
// server's certificate required and verified against ClientCA.
func (f TLSFiles) ServerTLS() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("the runner's certificate: %w", err)
	}
	pem, err := os.ReadFile(f.ClientCA)
	if err != nil {
		return nil, fmt.Errorf("the server's certificate authority: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the server's certificate authority %s holds no PEM certificate", f.ClientCA)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}, nil
}

// Listen serves ops on addr over mutually authenticated TLS, one Server
// per connection (a server that reconnects, or another replica taking the
// session over, gets a fresh stream and shell of its own). One connection
// is served at a time: a new one, once its handshake proved it is a
// server's, ends the one before it and waits for that connection's shell
// and what it started to be gone before it is served. So one shell drives
// the workspace at a time even when the server of the older connection
// cannot hang up (a replica frozen or cut off past its lease while another
// takes the session over). It returns when the listener fails.
func Listen(addr string, cfg *tls.Config, ops map[string]Handler, ready func(net.Addr)) error {
	ln, err := tls.Listen("tcp", addr, cfg)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	defer ln.Close()
	if ready != nil {
		ready(ln.Addr())
	}
	var (
		mu  sync.Mutex
		cur *served
	)
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		go func() {
			defer c.Close()
			// The handshake happens here, not in Accept: a client
			// without a valid certificate ends its own connection only,
			// and never the one being served.
			if err := c.(*tls.Conn).Handshake(); err != nil {
				return
			}
			me := &served{conn: c, done: make(chan struct{})}
			defer close(me.done)
			mu.Lock()
			prev := cur
			cur = me
			mu.Unlock()
			if prev != nil {
				_ = prev.conn.Close()
				<-prev.done // its shell is killed and reaped
			}
			_ = NewServer(ops).Serve(c)
		}()
	}
}

// served is the connection Listen serves, or the one that superseded it.
type served struct {
	conn net.Conn
	done chan struct{} // closed once its Server (and shell) ended
}
