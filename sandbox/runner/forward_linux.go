package runner

import (
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Forward is the network forwarder of a jail with an allowlist: it listens
// on addr (the jail's loopback), calls ready, then sends every accepted
// connection to the host over the socket ctlFD, where warren's proxy
// filters it (sandbox/netproxy). It returns when the host end closes.
func Forward(addr string, ctlFD int, ready func()) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("forwarder: listen on %s: %w", addr, err)
	}
	if ready != nil {
		ready()
	}
	syscall.CloseOnExec(ctlFD)
	for {
		c, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("forwarder: accept: %w", err)
		}
		raw, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			c.Close()
			continue
		}
		var sendErr error
		_ = raw.Control(func(fd uintptr) {
			sendErr = unix.Sendmsg(ctlFD, []byte{0}, unix.UnixRights(int(fd)), nil, 0)
		})
		c.Close()
		if sendErr != nil {
			return fmt.Errorf("forwarder: the proxy is gone: %w", sendErr)
		}
	}
}
