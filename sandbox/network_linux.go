package sandbox

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/netproxy"
)

// egressFiles are the descriptors of one jail start in allowlist mode.
type egressFiles struct {
	host  *os.File   // the proxy's end of the socket pair
	child []*os.File // the forwarder binary (O_PATH) and the jail's end
	e     *Egress
}

// openEgress opens what a jail with egress needs and numbers the child's
// descriptors from next on. With no egress it returns an empty set.
func openEgress(e *Egress, next int, fds *JailFDs) (*egressFiles, error) {
	fds.Forwarder, fds.ProxyCtl = -1, -1
	if e == nil {
		return &egressFiles{}, nil
	}
	// The server opens the binary where the jail's uid could not even look
	// it up; the jail executes the descriptor.
	bin, err := unix.Open(e.Forwarder, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("start jail: open forwarder %s: %w", e.Forwarder, err)
	}
	host, jail, err := netproxy.Pair()
	if err != nil {
		unix.Close(bin)
		return nil, fmt.Errorf("start jail: %w", err)
	}
	fds.Forwarder, fds.ProxyCtl = next, next+1
	return &egressFiles{host: host, child: []*os.File{os.NewFile(uintptr(bin), "forwarder"), jail}, e: e}, nil
}

// attach hands the host end to the proxy once the jail started.
func (f *egressFiles) attach() error {
	if f.host == nil {
		return nil
	}
	h := f.host
	f.host = nil
	return f.e.Attach(h)
}

// close releases what attach did not take (a failed start).
func (f *egressFiles) close() {
	if f.host != nil {
		f.host.Close()
	}
}
