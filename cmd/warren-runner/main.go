// Command warren-runner is the program warren starts inside every jail
// (docs/runner-protocol.md). It serves the server's requests on the
// jail's ends of two pipes and, in a jail with a network allowlist,
// forwards the jail's connections to warren's proxy.
//
// It is not run by hand: warren finds it beside its own binary (or through
// WARREN_RUNNER, or on PATH), opens it, and the jail executes the open
// descriptor. It links only what it needs, because one runs per live
// session: see the import test in sandbox/runner.
package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner"
)

const usage = "usage: warren-runner --conn IN,OUT [--shell-fds IN,STATUS,OUT,ERR] [--netfwd ADDR FD]   (started by warren inside a jail)\n" +
	"       warren-runner --listen ADDR --tls-cert FILE --tls-key FILE --tls-client-ca FILE\n" +
	"                     [--egress-listen 127.0.0.1:PORT --egress-proxy HOST:PORT]   (a runner reached over the network, in a pod)"

func main() {
	// One P: a request's goroutine runs on the thread that read its frame,
	// instead of waking a second thread for each hand-off (a third of a
	// short command's round trip), and an idle runner keeps fewer threads.
	runtime.GOMAXPROCS(1)
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	conn, connOut, fwdFD := -1, -1, -1
	fwdAddr, listen := "", ""
	var egress [2]string // listen, proxy
	var tlsFiles runner.TLSFiles
	for len(args) > 0 {
		switch {
		case args[0] == "--listen" && len(args) >= 2:
			listen, args = args[1], args[2:]
		case args[0] == "--tls-cert" && len(args) >= 2:
			tlsFiles.Cert, args = args[1], args[2:]
		case args[0] == "--tls-key" && len(args) >= 2:
			tlsFiles.Key, args = args[1], args[2:]
		case args[0] == "--tls-client-ca" && len(args) >= 2:
			tlsFiles.ClientCA, args = args[1], args[2:]
		case args[0] == "--shell-fds" && len(args) >= 2:
			if !shellFDs(args[1]) {
				fmt.Fprintln(os.Stderr, usage)
				return 2
			}
			args = args[2:]
		case args[0] == "--egress-listen" && len(args) >= 2:
			egress[0], args = args[1], args[2:]
		case args[0] == "--egress-proxy" && len(args) >= 2:
			egress[1], args = args[1], args[2:]
		case args[0] == "--conn" && len(args) >= 2:
			in, out, _ := strings.Cut(args[1], ",")
			conn, connOut = fd(in), fd(out)
			args = args[2:]
		case args[0] == "--netfwd" && len(args) >= 3:
			fwdAddr, fwdFD = args[1], fd(args[2])
			args = args[3:]
		case args[0] == "--version":
			fmt.Println("warren-runner protocol", 1)
			return 0
		default:
			fmt.Fprintln(os.Stderr, usage)
			return 2
		}
	}
	if (egress[0] == "") != (egress[1] == "") || (egress[0] != "" && listen == "") {
		fmt.Fprintln(os.Stderr, "warren-runner: --egress-listen and --egress-proxy go together, with --listen")
		return 2
	}
	if listen != "" {
		return serveNetwork(listen, tlsFiles, egress)
	}
	if conn < 0 || connOut < 0 || (fwdAddr != "" && fwdFD < 0) {
		fmt.Fprintln(os.Stderr, usage)
		return 2
	}
	// Commands in the jail run as the same uid: without this they could
	// ptrace the runner or read its memory. (The server trusts nothing the
	// runner says anyway; this keeps the runner's work its own.)
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// Nothing the runner inherited (its own binary, its connection, the
	// proxy's socket) reaches the shell it starts.
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) != nil {
		for fd := 3; fd < 64; fd++ {
			unix.CloseOnExec(fd)
		}
	}
	if fwdAddr != "" {
		ready := make(chan error, 1)
		go func() {
			ready <- runner.Forward(fwdAddr, fwdFD, func() { ready <- nil })
		}()
		if err := <-ready; err != nil {
			fmt.Fprintln(os.Stderr, "warren-runner:", err)
			return 1
		}
	}
	// The launcher waits for stdout to close: by then the forwarder
	// listens, so the first command finds the proxy ready.
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		_ = unix.Dup3(int(null.Fd()), 1, 0)
		null.Close()
	}
	srv := runner.NewServer(runner.Ops())
	err := srv.ServeFDs(conn, connOut)
	// The shell's status is the runner's, and so the jail's: the server
	// learns how an attached shell ended when it reaps the jail.
	if code, ok := srv.ShellExit(); ok {
		return code
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "warren-runner:", err)
		return 1
	}
	return 0
}

// shellFDs takes the descriptors of the shell's pipes (--shell-fds).
func shellFDs(s string) bool {
	parts := strings.Split(s, ",")
	if len(parts) != 4 {
		return false
	}
	var fds [4]int
	for i, p := range parts {
		if fds[i] = fd(p); fds[i] < 0 {
			return false
		}
	}
	runner.UseShellPipes(fds)
	return true
}

func fd(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 3 {
		return -1
	}
	return n
}

// serveNetwork serves the protocol on a TCP address with mutual TLS: the
// runner of a session whose jail is a pod, reached by the server over the
// network instead of two pipes.
//
// With egress set (the loopback address to listen on, warren's proxy), it
// also forwards the pod's connections to warren's proxy over TLS with its
// certificate, which names the session whose allowlist applies.
func serveNetwork(addr string, files runner.TLSFiles, egress [2]string) int {
	if files.Cert == "" || files.Key == "" || files.ClientCA == "" {
		fmt.Fprintln(os.Stderr, "warren-runner: --listen needs --tls-cert, --tls-key and --tls-client-ca: "+
			"a runner on a network serves only a server that proves who it is")
		return 2
	}
	cfg, err := files.ServerTLS()
	if err != nil {
		fmt.Fprintln(os.Stderr, "warren-runner:", err)
		return 1
	}
	if egress[0] != "" {
		ecfg, err := files.EgressTLS()
		if err != nil {
			fmt.Fprintln(os.Stderr, "warren-runner:", err)
			return 1
		}
		listening, failed := make(chan struct{}), make(chan error, 1)
		go func() { failed <- runner.ForwardTLS(egress[0], egress[1], ecfg, func() { close(listening) }) }()
		select {
		case <-listening:
		case err := <-failed:
			fmt.Fprintln(os.Stderr, "warren-runner:", err)
			return 1
		}
		go func() {
			// The forwarder's end is the pod's: without it the session's
			// allowlist is unreachable, so the pod restarts.
			fmt.Fprintln(os.Stderr, "warren-runner:", <-failed)
			os.Exit(1)
		}()
	}
	err = runner.Listen(addr, cfg, runner.Ops(), func(a net.Addr) {
		fmt.Println("listening on", a.String())
	})
	fmt.Fprintln(os.Stderr, "warren-runner:", err)
	return 1
}
