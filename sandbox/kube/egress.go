package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Egress of sessions in pods. A pod's runner forwards the connections of
// the pod's loopback (the session's HTTP_PROXY) to warren's egress proxy,
// each over TLS 1.3 with the runner's certificate: warren's authority
// issued it for the session's sandbox, so the certificate, and nothing
// the pod sends in the clear, says whose allowlist applies. The proxy
// itself is sandbox/netproxy's, as for a local jail.

// EgressProxyName is the name of the egress proxy's certificate, which
// runners check (sandbox/runner's EgressProxyName: a test keeps them
// equal).
const EgressProxyName = "warren-egress-proxy"

// Bounds of the egress listener.
const (
	// egressHandshakes caps the handshakes in progress at once; past it a
	// new connection is closed at once.
	egressHandshakes = 256
	// egressHandshakeTimeout bounds a client's handshake.
	egressHandshakeTimeout = 10 * time.Second
	// proxyValidity is how long the proxy's certificate lives; it is made
	// again when half of it is gone.
	proxyValidity = 48 * time.Hour
)

// EgressTLS is the TLS configuration of warren's egress proxy for pods:
// TLS 1.3, a certificate of the authority for EgressProxyName, and a
// client certificate required and checked (egressSession).
func (s *Sandboxes) EgressTLS(ctx context.Context) (*tls.Config, error) {
	ca, err := s.authority(ctx)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	var mu sync.Mutex
	var cur *tls.Certificate
	var made time.Time
	get := func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		mu.Lock()
		defer mu.Unlock()
		if cur != nil && time.Since(made) < proxyValidity/2 {
			return cur, nil
		}
		pair, err := ca.Issue(EgressProxyName, true, proxyValidity)
		if err != nil {
			return nil, err
		}
		c, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
		if err != nil {
			return nil, err
		}
		cur, made = &c, time.Now()
		return cur, nil
	}
	if _, err := get(nil); err != nil {
		return nil, fmt.Errorf("the egress proxy's certificate: %w", err)
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: get,
		// Requested, then checked by hand: a runner's certificate is a
		// server certificate (the one it serves warren with), which the
		// standard client check would refuse for its key usage.
		ClientAuth: tls.RequireAnyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := s.egressSession(pool, cs.PeerCertificates)
			return err
		},
	}, nil
}

// egressSession is the session whose runner presented chain: its leaf
// must be a runner certificate of warren's authority (pool) issued for a
// session's sandbox of this namespace. A warm pool's certificate names no
// session, and the server's own client certificate no runner: both are
// refused.
func (s *Sandboxes) egressSession(pool *x509.CertPool, chain []*x509.Certificate) (string, error) {
	if len(chain) == 0 {
		return "", errors.New("egress: no client certificate")
	}
	leaf := chain[0]
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return "", fmt.Errorf("egress: the client's certificate: %w", err)
	}
	if len(leaf.DNSNames) != 1 {
		return "", errors.New("egress: the client's certificate names no single runner")
	}
	sandbox, ok := strings.CutSuffix(leaf.DNSNames[0], "."+s.cfg.Namespace+".warren-runner")
	id, isSession := strings.CutPrefix(sandbox, "warren-")
	if !ok || !isSession {
		return "", errors.New("egress: the client's certificate is no session's runner's")
	}
	if name, err := Name(id); err != nil || name != sandbox {
		return "", errors.New("egress: the client's certificate is no session's runner's")
	}
	return id, nil
}

// sessionOf is the session of a connection whose handshake is done: the
// one its client's certificate names.
func (s *Sandboxes) sessionOf(c *tls.Conn) (string, error) {
	ca, err := s.authority(context.Background())
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return s.egressSession(pool, c.ConnectionState().PeerCertificates)
}

// ServeEgress accepts runners' connections on ln with cfg (EgressTLS),
// and hands each one, once its handshake has proved its session, to serve
// with that session's id; serve owns the connection. It returns when ln
// fails.
func (s *Sandboxes) ServeEgress(ln net.Listener, cfg *tls.Config, serve func(session string, c net.Conn)) error {
	slots := make(chan struct{}, egressHandshakes)
	for {
		raw, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of descriptors, or a connection reset before it was
			// accepted: the next ones may do, after a pause.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			raw.Close()
			continue
		}
		go func() {
			c := tls.Server(raw, cfg)
			_ = raw.SetDeadline(time.Now().Add(egressHandshakeTimeout))
			err := c.Handshake()
			<-slots
			if err != nil {
				raw.Close()
				return
			}
			id, err := s.sessionOf(c)
			if err != nil {
				raw.Close()
				return
			}
			_ = raw.SetDeadline(time.Time{})
			serve(id, c)
		}()
	}
}

// EgressPort is where a session's runner listens for its pod's egress on
// the pod's loopback: the port of the HTTP_PROXY warren sets in the
// session's shell (sandbox.ProxyPort, as in a local jail).
const EgressPort = 3128

// withEgress makes the pod's runner forward its loopback's port
// EgressPort to warren's proxy at proxy, replacing whatever egress the
// template's arguments named.
func withEgress(spec map[string]any, proxy string) error {
	ctrs, _, _ := unstructured.NestedSlice(spec, "containers")
	if len(ctrs) == 0 {
		return fmt.Errorf("spec.podTemplate has no container")
	}
	ctr, ok := ctrs[0].(map[string]any)
	if !ok {
		return fmt.Errorf("spec.podTemplate's first container is not an object")
	}
	args, _, err := unstructured.NestedStringSlice(ctr, "args")
	if err != nil {
		return fmt.Errorf("the runner's args: %w", err)
	}
	kept := []string{}
	for i := 0; i < len(args); i++ {
		if args[i] == "--egress-listen" || args[i] == "--egress-proxy" {
			i++
			continue
		}
		kept = append(kept, args[i])
	}
	kept = append(kept, "--egress-listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(EgressPort)), "--egress-proxy", proxy)
	if err := unstructured.SetNestedStringSlice(ctr, kept, "args"); err != nil {
		return err
	}
	ctrs[0] = ctr
	return unstructured.SetNestedSlice(spec, ctrs, "containers")
}

// Egress is the address pods dial for warren's egress proxy, "" when
// allowlists are not served to pods.
func (s *Sandboxes) Egress() string { return s.cfg.EgressProxy }
