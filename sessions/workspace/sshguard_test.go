package workspace

import (
	"context"
	"errors"
	"net"
	"testing"

	"golang.org/x/net/proxy"
)

// go-git's ssh dial for a caller who is not the operator goes through the
// public-address check: loopback is refused before any byte is sent; the
// tests' loopback allowance connects; the operator gets no proxy at all.
func TestSSHProxyChecksTheAddressDialed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	dial := func(p Policy) error {
		opts := SSHProxy(p)
		u, err := opts.FullURL()
		if err != nil {
			t.Fatal(err)
		}
		d, err := proxy.FromURL(u, proxy.Direct)
		if err != nil {
			t.Fatal(err)
		}
		c, err := d.(proxy.ContextDialer).DialContext(context.Background(), "tcp", ln.Addr().String())
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(Policy{}); !errors.Is(err, errNotPublic) {
		t.Fatalf("a public-only caller reached loopback: %v", err)
	}
	select {
	case <-accepted:
		t.Fatal("the refused dial connected")
	default:
	}
	if err := dial(Policy{allowLoopback: true}); err != nil {
		t.Fatalf("loopback allowed: %v", err)
	}
	<-accepted
	if got := SSHProxy(Policy{Trusted: true}); got.URL != "" {
		t.Fatalf("the operator's ssh goes through %q", got.URL)
	}
}
