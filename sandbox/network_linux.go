package sandbox

import (
	"fmt"
	"os"

	"github.com/warrenhq/warren/sandbox/netproxy"
)

// egressFiles are the descriptors of one jail start in allowlist mode.
type egressFiles struct {
	host  *os.File   // the proxy's end of the socket pair
	child []*os.File // the jail's end
	e     *Egress
}

// openEgress opens what a jail with egress needs and numbers the child's
// descriptors from next on. With no egress it returns an empty set.
func openEgress(e *Egress, next int, fds *JailFDs) (*egressFiles, error) {
	fds.ProxyCtl = -1
	if e == nil {
		return &egressFiles{}, nil
	}
	host, jail, err := netproxy.Pair()
	if err != nil {
		return nil, fmt.Errorf("start jail: %w", err)
	}
	fds.ProxyCtl = next
	return &egressFiles{host: host, child: []*os.File{jail}, e: e}, nil
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
