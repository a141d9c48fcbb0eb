package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Network policy of a jail. Profile.Network (the host's whole network) and
// Profile.Egress (allowlist through warren's proxy) are exclusive; with
// neither the jail has a network namespace of its own with loopback only.

// Egress sends a jail's HTTP and HTTPS through warren's proxy: the jail
// keeps its own network namespace, and a forwarder inside it listens on the
// jail's loopback and hands each connection to the host over a socket pair
// (see sandbox/netproxy). The proxy variables are set in the shell.
type Egress struct {
	// Forwarder is the host path of a binary that runs the forwarder as
	// "<binary> __netfwd ADDR FD": warren itself. The server opens it and
	// the jail executes the open descriptor (/proc/self/fd/N): the jail's
	// uid needs no access to its host path, and nothing is mounted.
	Forwarder string
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
	if e.Forwarder == "" || e.Attach == nil {
		return fmt.Errorf("profile: egress needs a forwarder binary and an attach function")
	}
	if p := e.port(); p > 65535 {
		return fmt.Errorf("profile: proxy port %d out of range", p)
	}
	return nil
}

// egressCommand wraps the jailed command in a launcher that starts the
// forwarder first. The forwarder is started from a subshell that exits at
// once, so it is a child of the jail's init and not of the shell: a
// command's timeout, which kills the shell's children, spares it. The
// launcher waits for the forwarder's stdout to close (it does once it
// listens), so the first command finds the proxy ready; the shell itself
// does not inherit the proxy socket.
func egressCommand(p Profile, fds JailFDs, command []string) []string {
	if p.Egress == nil || fds.Forwarder < 0 || fds.ProxyCtl < 0 || len(command) == 0 {
		return command
	}
	ctl := strconv.Itoa(fds.ProxyCtl)
	var closeFwd []string
	for fd := 3; fd <= 9; fd++ {
		if fd != fds.ProxyCtl && fd != fds.Forwarder {
			closeFwd = append(closeFwd, strconv.Itoa(fd)+">&-")
		}
	}
	quoted := make([]string, len(command))
	for i, c := range command {
		quoted[i] = shellQuote(c)
	}
	launcher := "r=$( (/proc/self/fd/" + strconv.Itoa(fds.Forwarder) + " __netfwd 127.0.0.1:" + strconv.Itoa(p.Egress.port()) + " " + ctl +
		" </dev/null 2>/dev/null " + strings.Join(closeFwd, " ") + " &) ); " +
		"exec " + strings.Join(quoted, " ") + " " + ctl + ">&- " + strconv.Itoa(fds.Forwarder) + ">&-"
	return []string{"/bin/sh", "-c", launcher}
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
