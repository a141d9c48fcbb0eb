package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner"
	"github.com/warrenhq/warren/sandbox/runner/client"
)

// runnerFiles are the descriptors of one jail start for its runner.
type runnerFiles struct {
	bin *os.File // the runner's binary, read-only: the jail executes it
	// The connection is two pipes, one a direction (see openRunner): the
	// jail's ends (the runner reads the first, writes the second) and the
	// server's.
	jail [2]*os.File
	host *runner.Pipes
	id   fileID // the binary's identity, to tell the runner's process from others
	// The shell's pipes (proto.OpShellAttach): the jail's ends (stdin's
	// read end, the status, stdout and stderr write ends), and the
	// server's, which a command's bytes go through.
	shellJail []*os.File
	shellHost runner.DriverPipes
}

// fileID identifies a file by device and inode.
type fileID struct{ dev, ino uint64 }

// openRunner opens the runner's binary and the two pipes of its
// connection, numbering them from next on in fds (the binary, then the
// pipe the runner reads, then the one it writes).
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
	// Two pipes rather than a socket pair: a socket wakes its writer's
	// poller each time the peer reads (EPOLLOUT), a spurious wake-up of the
	// other process per message, and a pipe wakes a writer only when it was
	// full. The writing ends stay blocking, out of Go's poller.
	var toRunner, fromRunner [2]int
	if err := unix.Pipe2(toRunner[:], unix.O_CLOEXEC); err != nil {
		bin.Close()
		return nil, fmt.Errorf("start jail: the runner's pipes: %w", err)
	}
	if err := unix.Pipe2(fromRunner[:], unix.O_CLOEXEC); err != nil {
		unix.Close(toRunner[0])
		unix.Close(toRunner[1])
		bin.Close()
		return nil, fmt.Errorf("start jail: the runner's pipes: %w", err)
	}
	fds.Runner, fds.Conn = next, next+1
	// The server's reading end is non-blocking: its reads wait in Go's
	// poller, not in a thread parked in read(2) (a round trip costs half
	// as much).
	_ = unix.SetNonblock(fromRunner[0], true)
	return &runnerFiles{bin: bin,
		host: &runner.Pipes{R: os.NewFile(uintptr(fromRunner[0]), "runner-out"), W: os.NewFile(uintptr(toRunner[1]), "runner-in")},
		jail: [2]*os.File{os.NewFile(uintptr(toRunner[0]), "runner-jail-in"), os.NewFile(uintptr(fromRunner[1]), "runner-jail-out")},
		id:   fileID{uint64(st.Dev), st.Ino}}, nil
}

// boardPipeSize is the capacity of a runner jail's pipes (the task
// board's): its file, a megabyte with a thousand tasks, goes through them
// whole at every read and write, and through the default 64 KiB a
// megabyte took sixteen wake-ups of each side where the socket pair this
// replaced, with its 208 KiB, took five (0.5 ms more an update,
// BenchmarkBoardOps). Only that one jail a server gets it: the kernel
// counts pipe capacity per user (fs.pipe-user-pages-soft, 64 MiB), and a
// user over it gets the smallest pipes for every new one, the shells'
// included, so sessions' jails keep the default.
const boardPipeSize = 1 << 20

// widen sets the connection's pipes' capacity to n bytes, where the
// kernel allows (fs.pipe-max-size, the user's share); otherwise they keep
// the default, which only costs more wake-ups.
func (f *runnerFiles) widen(n int) {
	for _, p := range []*os.File{f.jail[0], f.jail[1]} {
		if p != nil {
			_, _ = unix.FcntlInt(p.Fd(), unix.F_SETPIPE_SZ, n)
		}
	}
}

// closeJail closes the jail's ends of the connection (the jail has them,
// or its start failed).
func (f *runnerFiles) closeJail() {
	for _, p := range f.jail {
		if p != nil {
			p.Close()
		}
	}
}

// openShellPipes makes the shell's pipes (proto.OpShellAttach), numbered
// in fds after the runner's connection. The caller closes the jail's ends
// once the jail has them (child), and owns the server's (shellHost).
func (f *runnerFiles) openShellPipes(fds *JailFDs) error {
	var pipes [4][2]*os.File // stdin, status, stdout, stderr: read and write ends
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			for _, p := range pipes[:i] {
				p[0].Close()
				p[1].Close()
			}
			return fmt.Errorf("start jail: the shell's pipes: %w", err)
		}
		pipes[i] = [2]*os.File{r, w}
	}
	f.shellJail = []*os.File{pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1]}
	f.shellHost = runner.DriverPipes{Stdin: pipes[0][1], Status: pipes[1][0], Stdout: pipes[2][0], Stderr: pipes[3][0]}
	fds.Shell = fds.Conn + 2
	return nil
}

// child returns the descriptors the jail inherits, in fds order.
func (f *runnerFiles) child() []*os.File {
	return append([]*os.File{f.bin, f.jail[0], f.jail[1]}, f.shellJail...)
}

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
	f.closeShellHost()
}

// closeShellHost closes the server's ends of the shell's pipes.
func (f *runnerFiles) closeShellHost() {
	for _, p := range []*os.File{f.shellHost.Stdin, f.shellHost.Status, f.shellHost.Stdout, f.shellHost.Stderr} {
		if p != nil {
			p.Close()
		}
	}
	f.shellHost = runner.DriverPipes{}
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
	own := []int{fds.Runner, fds.Conn, fds.Conn + 1}
	args := " --conn " + strconv.Itoa(fds.Conn) + "," + strconv.Itoa(fds.Conn+1)
	if fds.Shell >= 3 {
		own = append(own, fds.Shell, fds.Shell+1, fds.Shell+2, fds.Shell+3)
		args += " --shell-fds " + strconv.Itoa(fds.Shell) + "," + strconv.Itoa(fds.Shell+1) + "," +
			strconv.Itoa(fds.Shell+2) + "," + strconv.Itoa(fds.Shell+3)
	}
	if p.Egress != nil && fds.ProxyCtl >= 3 {
		own = append(own, fds.ProxyCtl)
		args += " --netfwd 127.0.0.1:" + strconv.Itoa(p.Egress.port()) + " " + strconv.Itoa(fds.ProxyCtl)
	}
	var closeOthers []string
	last := 9
	for _, o := range own {
		last = max(last, o)
	}
	for fd := 3; fd <= last; fd++ {
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
