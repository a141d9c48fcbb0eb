package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/client"
)

// jail is one running bwrap process with its shell. A Shell replaces its
// jail when the shell dies or wedges.
type jail struct {
	cmd     *exec.Cmd
	stdin   *os.File
	initPID int // host pid of the jail's init (bwrap's pid 1)

	shellOnce sync.Once
	shellPID  int

	// background holds the shell's children alive when the last command
	// ended; only Exec, holding the shell's turn, touches it.
	background []int

	pipes [2]*pipeReader // stdout, stderr
	// status is the read end of the shell's status pipe. Only
	// Exec reads it, holding the shell's turn; statusDirty says the last
	// command did not end with a whole record, so a piece of it may still
	// be in the pipe.
	status      *os.File
	statusDirty bool
	statusClose sync.Once

	exited   chan struct{} // closed once bwrap has been reaped
	exitCode int           // valid after exited is closed

	// runner is the connection to the jail's runner, nil in a jail
	// started without one; runnerID is its binary, which tells its
	// process from the others.
	runner   *client.Conn
	runnerID fileID
}

// pipeReader drains one pipe of the shell for the jail's whole life and
// hands each chunk to the running command, if any, so the shell never
// blocks on a full pipe. Each read and the feeding of what it read happen
// under mu: whoever holds mu knows that every byte read so far has been
// fed, which lets a command's end be found without end markers in the
// output streams (see drain).
type pipeReader struct {
	f   *os.File
	rc  syscall.RawConn
	eof chan struct{}

	mu     sync.Mutex // guards feed, buf and closed, and is held across read+feed
	feed   func([]byte)
	buf    []byte
	closed bool // EOF or an error was read: the descriptor is done with
}

func newPipeReader(f *os.File) (*pipeReader, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &pipeReader{f: f, rc: rc, eof: make(chan struct{}), buf: make([]byte, 64<<10)}, nil
}

func (p *pipeReader) setFeed(f func([]byte)) {
	p.mu.Lock()
	p.feed = f
	p.mu.Unlock()
}

// readLocked reads once from fd and feeds what came. It reports whether
// the pipe would block, and ends the reader at EOF or on an error.
func (p *pipeReader) readLocked(fd uintptr) (wouldBlock bool) {
	n, wouldBlock, end := readOnce(fd, p.buf)
	if n > 0 && p.feed != nil {
		p.feed(p.buf[:n])
	}
	if end { // EOF or an error: nothing more will come
		p.closed = true
	}
	return wouldBlock
}

// readOnce reads what the non-blocking descriptor fd holds into buf,
// without waiting: n bytes, or wouldBlock when it holds nothing yet, or
// end at EOF or on an error.
func readOnce(fd uintptr, buf []byte) (n int, wouldBlock, end bool) {
	for {
		n, err := unix.Read(int(fd), buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, true, false
		case n > 0:
			return n, false, false
		default:
			return 0, false, true
		}
	}
}

func (p *pipeReader) loop() {
	defer close(p.eof)
	for {
		err := p.rc.Read(func(fd uintptr) bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return !p.readLocked(fd) // false: wait until readable, then call again
		})
		p.mu.Lock()
		done := p.closed || err != nil
		p.closed = done
		p.mu.Unlock()
		if done {
			p.f.Close()
			return
		}
	}
}

// drain reads and feeds, under mu, everything the pipe holds now, then
// sets the feed to next. Bytes a process wrote before the call are fed to
// the old feed by the time it returns, whichever goroutine read them.
func (p *pipeReader) drain(next func([]byte)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		_ = p.rc.Control(func(fd uintptr) {
			for !p.closed && !p.readLocked(fd) {
			}
		})
	}
	p.feed = next
}

// jailSpec is what startJail needs besides the profile.
type jailSpec struct {
	bwrap   string
	profile Profile
	cred    *syscall.Credential // nil: run as the server's own uid
	cg      *cgroup             // nil: no cgroup
	init    string              // shell script run before the first command
	// workspace is a duplicate of the shell's open workspace directory,
	// bound by descriptor; startJail closes it once bwrap has it.
	workspace *os.File
	// onExit, when set, runs once bwrap has been reaped, before anyone
	// waiting for the jail's end learns of it.
	onExit func()
	// runner is the host path of the runner's binary; empty starts the
	// jail without one.
	runner string
}

// startJail starts bwrap with /bin/sh inside. The shell reads commands on
// stdin, writes the commands' output on stdout/stderr (moved to fds 7 and
// 8 by the init script) and status records on fd 4 (its stdout from then
// on).
func startJail(spec jailSpec) (*jail, error) {
	var files []*os.File // child ends, closed once the child has them
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return
	}
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	inR, inW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	infoR, infoW, err4 := pipe()
	statR, statW, err5 := pipe()
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		closeAll()
		return nil, fmt.Errorf("start jail: pipes: %w", err)
	}

	fds := JailFDs{Info: 3, Seccomp: -1}
	extra := []*os.File{infoW, statW} // fds 3 and 4
	if prog := seccompProgram(); spec.profile.Seccomp && prog != nil {
		// The program is a few hundred bytes: it fits in the pipe's buffer
		// before bwrap reads it.
		secR, secW, err := pipe()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("start jail: pipes: %w", err)
		}
		_, err = secW.Write(prog)
		secW.Close()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("start jail: seccomp program: %w", err)
		}
		fds.Seccomp = 5
		extra = append(extra, secR)
	}
	if spec.workspace != nil {
		fds.Workspace = 3 + len(extra)
		extra = append(extra, spec.workspace)
	}
	eg, egErr := openEgress(spec.profile.Egress, 3+len(extra), &fds)
	if egErr != nil {
		closeAll()
		return nil, egErr
	}
	extra = append(extra, eg.child...)
	rn := &runnerFiles{}
	if spec.runner != "" {
		var err error
		if rn, err = openRunner(spec.runner, 3+len(extra), &fds); err != nil {
			eg.close()
			for _, f := range eg.child {
				f.Close()
			}
			closeAll()
			return nil, err
		}
		extra = append(extra, rn.child()...)
	} else {
		fds.Runner, fds.Conn = -1, -1
	}
	cmd := exec.Command(spec.bwrap, BwrapArgs(spec.profile, fds, "/bin/sh")...)
	// bwrap's own init keeps bwrap's environment, visible in the jail as
	// /proc/1/environ: give it none of the server's.
	cmd.Env = []string{}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.ExtraFiles = extra
	// Setpgid: a process group of its own, so that a terminal's Ctrl-C
	// (SIGINT to the whole foreground group, in `warren shell`) reaches
	// warren, which interrupts only the running command, and never bwrap,
	// whose death would restart the shell and kill its background jobs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: spec.cred, Setpgid: true}
	if spec.cg != nil && spec.cg.v2 {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = spec.cg.fd
	}

	// status is set before the goroutine below can read it (interruptStatus).
	j := &jail{cmd: cmd, stdin: inW, status: statR, exited: make(chan struct{})}
	started := make(chan error, 1)
	// Pdeathsig fires when the thread that forked the child exits, not the
	// process (golang/go#27505): this goroutine locks its thread and lives
	// as long as the jail.
	go func() {
		runtime.LockOSThread()
		if spec.cg != nil {
			if err := spec.cg.enterThread(); err != nil {
				started <- err
				return
			}
		}
		err := cmd.Start()
		if spec.cg != nil {
			spec.cg.leaveThread()
		}
		started <- err
		if err != nil {
			return
		}
		jailsLive.Inc()
		_ = cmd.Wait()
		jailsLive.Dec()
		j.exitCode = exitStatus(cmd.ProcessState)
		if spec.onExit != nil {
			spec.onExit()
		}
		close(j.exited)
		j.interruptStatus() // a command waiting for its record learns now
	}()
	err := <-started
	for _, f := range append([]*os.File{inR, outW, errW}, extra...) { // the child's ends
		f.Close()
	}
	if err != nil {
		eg.close()
		rn.close()
		for _, f := range []*os.File{inW, outR, errR, infoR, statR} {
			f.Close()
		}
		return nil, fmt.Errorf("start jail: %w", err)
	}
	if rn.host != nil {
		j.runner, j.runnerID = rn.connect(), rn.id
	}
	if err := eg.attach(); err != nil {
		j.kill()
		for _, f := range []*os.File{outR, errR, infoR, statR} {
			f.Close()
		}
		return nil, fmt.Errorf("start jail: %w", err)
	}

	pid, infoErr := readInfo(infoR)
	infoR.Close()
	if infoErr != nil {
		// bwrap failed before the jail existed; its stderr says why.
		msg, _ := io.ReadAll(io.LimitReader(errR, 4096))
		j.kill()
		for _, f := range []*os.File{inW, outR, errR, statR} {
			f.Close()
		}
		if m := strings.TrimSpace(string(msg)); m != "" {
			return nil, fmt.Errorf("start jail: %s (run 'warren doctor')", m)
		}
		return nil, fmt.Errorf("start jail: %w (run 'warren doctor')", infoErr)
	}
	j.initPID = pid
	j.statusDirty = true // what the init script might print is not a record
	for i, f := range []*os.File{outR, errR} {
		if j.pipes[i], err = newPipeReader(f); err != nil {
			j.kill()
			return nil, fmt.Errorf("start jail: %w", err)
		}
	}
	for _, p := range j.pipes {
		go p.loop()
	}
	if _, err := io.WriteString(j.stdin, spec.init); err != nil {
		j.kill()
		return nil, fmt.Errorf("start jail: write init script: %w", err)
	}
	return j, nil
}

// readInfo reads bwrap's --info-fd document for the jail's pid.
func readInfo(r *os.File) (int, error) {
	_ = r.SetReadDeadline(time.Now().Add(15 * time.Second))
	var info struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.NewDecoder(r).Decode(&info); err != nil {
		return 0, fmt.Errorf("bwrap did not report the jail's pid: %w", err)
	}
	if info.ChildPID <= 0 {
		return 0, errors.New("bwrap reported no jail pid")
	}
	return info.ChildPID, nil
}

// shell returns the host pid of the jailed /bin/sh (the only child of the
// jail's init), or 0 when it is gone. bwrap forks it right after the init
// starts, but on a loaded host that can take a while: wait until it shows,
// the jail ends, or 10 s have passed.
func (j *jail) shell() int {
	j.shellOnce.Do(func() {
		deadline := time.Now().Add(10 * time.Second)
		for pause := time.Millisecond; time.Now().Before(deadline); pause = min(2*pause, 20*time.Millisecond) {
			if c := children(j.initPID); len(c) > 0 {
				j.shellPID = c[0]
				return
			}
			select {
			case <-j.exited:
				return
			case <-time.After(pause):
			}
		}
	})
	return j.shellPID
}

// alive reports whether bwrap is still running.
func (j *jail) alive() bool {
	select {
	case <-j.exited:
		return false
	default:
		return true
	}
}

// kill ends the whole jail and reaps it. Killing the pid namespace's init
// kills every process inside, background jobs included; bwrap outside
// reaps the init and exits, so killing bwrap itself is the fallback only.
func (j *jail) kill() {
	if j.initPID > 0 {
		_ = syscall.Kill(j.initPID, syscall.SIGKILL)
		select {
		case <-j.exited:
		case <-time.After(2 * time.Second):
		}
	}
	if j.cmd.Process != nil {
		_ = j.cmd.Process.Kill()
	}
	<-j.exited
	j.stdin.Close()
	j.statusClose.Do(func() { j.status.Close() })
	if j.runner != nil {
		j.runner.Close()
	}
}

// interruptStatus ends a wait for a status record at once.
func (j *jail) interruptStatus() {
	if j.status != nil {
		_ = j.status.SetReadDeadline(time.Unix(1, 0))
	}
}

// dropStaleStatus empties the status pipe when the last command did not
// end with a whole record: a late piece of it must not be read as the
// next command's.
func (j *jail) dropStaleStatus() {
	if !j.statusDirty {
		return
	}
	j.statusDirty = false
	j.readNow(func([]byte) {})
}

// readNow hands what the status pipe holds now to take, without waiting
// (a read deadline cannot do that: a passed one fails before reading).
func (j *jail) readNow(take func([]byte)) {
	rc, err := j.status.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		var buf [4096]byte
		for {
			n, _, _ := readOnce(fd, buf[:])
			if n == 0 {
				return
			}
			take(buf[:n])
		}
	})
}

// waitEOF waits until stdout and stderr are drained to their end, at most d.
func (j *jail) waitEOF(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, p := range j.pipes[:2] {
		select {
		case <-p.eof:
		case <-t.C:
			return
		}
	}
}

// exitStatus turns a process state into a shell-style exit code.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// prlimit is unix.Prlimit; tests replace it to make it fail.
var prlimit = unix.Prlimit

// limitProcesses sets RLIMIT_NPROC on the jailed shell (pid), so every
// process of the jail inherits it. A server that is not root cannot raise
// the shell's hard limit: when that is already below n, it binds harder
// than n would, and is kept. A root server without CAP_SYS_RESOURCE (the
// default in a container) may not touch the limits of another uid's
// process at all: that is fine when the jail's cgroup caps its processes
// (inCgroup), and refused otherwise, since nothing would bound them.
func limitProcesses(pid int, n uint64, inCgroup bool) error {
	if pid <= 0 {
		return errors.New("the jail's shell did not start")
	}
	var cur unix.Rlimit
	err := prlimit(pid, unix.RLIMIT_NPROC, nil, &cur)
	if err == nil {
		if os.Geteuid() != 0 && n > cur.Max {
			n = cur.Max
		}
		err = prlimit(pid, unix.RLIMIT_NPROC, &unix.Rlimit{Cur: n, Max: n}, nil)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EPERM) && inCgroup:
		return nil // the cgroup's pids.max bounds the jail
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("%w: the server may not limit another uid's processes (it lacks "+
			"CAP_SYS_RESOURCE) and the jail has no cgroup to bound them; give warren "+
			"CAP_SYS_RESOURCE or cgroups (see 'warren doctor')", err)
	}
	return err
}
