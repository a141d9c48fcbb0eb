package sandbox

import (
	"fmt"
	"os"
	"strconv"
)

// Network policy of a jail. Profile.Network (the host's whole network) and
// Profile.Egress (allowlist through warren's proxy) are exclusive; with
// neither the jail has a network namespace of its own with loopback only.

// Egress sends a jail's HTTP and HTTPS through warren's proxy: the jail
// keeps its own network namespace, and the jail's runner listens on the
// jail's loopback and hands each connection to the host over a socket pair
// (see sandbox/netproxy). The proxy variables are set in the shell.
type Egress struct {
	// Port is the proxy's port on the jail's loopback; 0 means ProxyPort.
	Port int
	// Attach receives the host end of the proxy socket of each jail start;
	// it owns it from then on.
	Attach func(host *os.File) error
}

// ProxyPort is the default port of the proxy on the jail's loopback.
const ProxyPort = 3128

func (e *Egress) port() int {
	if e.Port > 0 {
		return e.Port
	}
	return ProxyPort
}

// ProxyEnv returns the variables that point curl, git, npm, pip and Go at
// the proxy.
func (e *Egress) ProxyEnv() map[string]string {
	u := "http://127.0.0.1:" + strconv.Itoa(e.port())
	no := "localhost,127.0.0.1,::1"
	return map[string]string{"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u,
		"NO_PROXY": no, "no_proxy": no}
}

func (e *Egress) validate(p Profile) error {
	if p.Network {
		return fmt.Errorf("profile: host network and egress through the proxy are exclusive")
	}
	if e.Attach == nil {
		return fmt.Errorf("profile: egress needs an attach function")
	}
	if p := e.port(); p > 65535 {
		return fmt.Errorf("profile: proxy port %d out of range", p)
	}
	return nil
}

// withEnv returns env with extra added, without changing env.
func withEnv(env, extra map[string]string) map[string]string {
	out := make(map[string]string, len(env)+len(extra))
	for k, v := range env {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}
