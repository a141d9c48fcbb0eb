package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/client"
)

// runnerFiles are the descriptors of one jail start for its runner.
type runnerFiles struct {
	bin  *os.File // the runner's binary, read-only: the jail executes it
	jail *os.File // the jail's end of the socket pair
	host *os.File // the server's end
	id   fileID   // the binary's identity, to tell the runner's process from others
}

// fileID identifies a file by device and inode.
type fileID struct{ dev, ino uint64 }

// openRunner opens the runner's binary and a socket pair for its
// connection, numbering them from next on in fds.
func openRunner(path string, next int, fds *JailFDs) (*runnerFiles, error) {
	fds.Runner, fds.Conn = -1, -1
	// The server opens the binary where the jail's uid could not even look
	// it up; the jail executes the descriptor.
	bin, err := os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("start jail: open the runner %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(bin.Fd()), &st); err != nil {
		bin.Close()
		return nil, fmt.Errorf("start jail: the runner %s: %w", path, err)
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		bin.Close()
		return nil, fmt.Errorf("start jail: the runner's socket pair: %w", err)
	}
	fds.Runner, fds.Conn = next, next+1
	// The server's end is non-blocking: its reads wait in Go's poller, not
	// in a thread parked in read(2) (a round trip costs half as much).
	_ = unix.SetNonblock(sp[0], true)
	return &runnerFiles{bin: bin, host: os.NewFile(uintptr(sp[0]), "runner"), jail: os.NewFile(uintptr(sp[1]), "runner-jail"),
		id: fileID{uint64(st.Dev), st.Ino}}, nil
}

// child returns the descriptors the jail inherits, in fds order.
func (f *runnerFiles) child() []*os.File { return []*os.File{f.bin, f.jail} }

// connect hands the server's end to a client; the caller owns it.
func (f *runnerFiles) connect() *client.Conn {
	h := f.host
	f.host = nil
	return client.New(h)
}

// close releases what connect did not take (a failed start).
func (f *runnerFiles) close() {
	if f.host != nil {
		f.host.Close()
	}
}

// isRunner reports whether the host process pid runs the runner's binary
// (a process may exec it, but then it runs the runner's code, which
// neither forks nor loops: sparing it spares nothing else).
func (f fileID) isRunner(pid int) bool {
	var st unix.Stat_t
	if unix.Stat("/proc/"+strconv.Itoa(pid)+"/exe", &st) != nil {
		return false
	}
	return uint64(st.Dev) == f.dev && st.Ino == f.ino
}

// runnerCommand makes the jail's command the runner, which starts the
// persistent shell itself (sandbox/runner: shell.exec). A small launcher
// closes the descriptors the runner does not own and executes the runner's
// binary from its descriptor, so the runner is the jail's only child of
// its init: the jail lives as long as the runner, and the runner as long
// as its shell. With egress the runner listens for the jail's connections
// before it says hello, so the first command finds the proxy ready.
func runnerCommand(p Profile, fds JailFDs, command []string) []string {
	if fds.Runner < 3 || fds.Conn < 3 || len(command) == 0 {
		return command
	}
	own := []int{fds.Runner, fds.Conn}
	args := " --conn " + strconv.Itoa(fds.Conn)
	if p.Egress != nil && fds.ProxyCtl >= 3 {
		own = append(own, fds.ProxyCtl)
		args += " --netfwd 127.0.0.1:" + strconv.Itoa(p.Egress.port()) + " " + strconv.Itoa(fds.ProxyCtl)
	}
	var closeOthers []string
	for fd := 3; fd <= 9; fd++ {
		mine := false
		for _, o := range own {
			mine = mine || o == fd
		}
		if !mine {
			closeOthers = append(closeOthers, strconv.Itoa(fd)+">&-")
		}
	}
	return []string{"/bin/sh", "-c", "exec /proc/self/fd/" + strconv.Itoa(fds.Runner) + args +
		" </dev/null >/dev/null 2>/dev/null " + strings.Join(closeOthers, " ")}
}

// isRunner reports whether pid is the jail's runner (see fileID.isRunner).
func (j *jail) isRunner(pid int) bool {
	return j.runner != nil && j.runnerID.isRunner(pid)
}

// others lists the processes in the jail besides its shell and its
// runner: a running command's, background jobs, daemons.
func (j *jail) others() []int {
	if j.remote {
		return nil // not this host's processes
	}
	shell := j.shell()
	var out []int
	for _, pid := range descendants(j.initPID) {
		if pid != shell && !j.isRunner(pid) {
			out = append(out, pid)
		}
	}
	return out
}
