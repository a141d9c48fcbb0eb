package netproxy

import (
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// The jail reaches the proxy through a forwarder that runs inside the
// jail's network namespace: it listens on the jail's loopback, and hands
// each accepted connection's descriptor to the host over a unix socket
// pair (SCM_RIGHTS). The host then serves the connection directly: no
// socket file, no shared network, no bytes copied twice.

// Pair returns a connected socket pair for one jail start: host is kept by
// the server and given to Attach, jail is passed to the jail's forwarder.
func Pair() (host, jail *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("proxy socket pair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "proxy-host"), os.NewFile(uintptr(fds[1]), "proxy-jail"), nil
}

// Attach serves the connections a jail's forwarder sends over ctl until
// the jail closes its end. It takes ownership of ctl and returns at once.
// Only TCP sockets are accepted: whatever else arrives is closed unread.
func (s *Session) Attach(ctl *os.File) error {
	c, err := net.FileConn(ctl)
	ctl.Close()
	if err != nil {
		return fmt.Errorf("attach proxy socket: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return errors.New("attach proxy socket: not a unix socket")
	}
	go s.receive(uc)
	return nil
}

func (s *Session) receive(uc *net.UnixConn) {
	defer uc.Close()
	buf := make([]byte, 16)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		_, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
		if err != nil {
			return
		}
		if oobn == 0 {
			continue
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				if c := tcpConn(fd); c != nil {
					s.ServeConn(c)
				}
			}
		}
		if s.closed.Load() {
			return
		}
	}
}

// tcpConn turns a received descriptor into a connection when it is a TCP
// socket, and closes it otherwise.
func tcpConn(fd int) net.Conn {
	unix.CloseOnExec(fd)
	typ, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	dom, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err1 != nil || err2 != nil || typ != unix.SOCK_STREAM || (dom != unix.AF_INET && dom != unix.AF_INET6) {
		unix.Close(fd)
		return nil
	}
	f := os.NewFile(uintptr(fd), "proxy-client")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil
	}
	return c
}
