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

	"github.com/warrenhq/warren/sandbox/runner"
	"github.com/warrenhq/warren/sandbox/runner/client"
)

// jail is one running bwrap process with its runner, which owns the
// jail's shell (sandbox/runner: shell.exec). A Shell replaces its jail when
// the shell dies or wedges.
type jail struct {
	cmd     *exec.Cmd
	initPID int // host pid of the jail's init (bwrap's pid 1)

	runnerOnce sync.Once
	runnerPID  int // host pid of the runner, the init's one child

	// shellUp: the runner has started the shell (its first command
	// carried the init script); exports is the version of the shell's
	// exports the server holds. Only Exec, holding the turn, touches them.
	shellUp bool
	exports uint64

	exited   chan struct{} // closed once bwrap has been reaped
	exitCode int           // valid after exited is closed

	// runner is the connection to the jail's runner, nil in a jail
	// started without one; runnerID is its binary, which tells its
	// process from the others.
	runner   *client.Conn
	runnerID fileID
	// pipes are the server's ends of the shell's pipes, until driver (made
	// by the first command: attach) takes them.
	pipesMu sync.Mutex
	pipes   runner.DriverPipes
	driver  *runner.Driver
	// remote: the runner is on the network (NewNetShell); the jail is
	// its connection, with no process of this host.
	remote bool
}

// jailSpec is what startJail needs besides the profile.
type jailSpec struct {
	bwrap   string
	profile Profile
	cred    *syscall.Credential // nil: run as the server's own uid
	cg      *cgroup             // nil: no cgroup
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

// startJail starts bwrap with the runner inside; the runner starts the
// shell on the first command.
func startJail(spec jailSpec) (*jail, error) {
	var files []*os.File // child ends, closed once the child has them
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	errR, errW, err1 := os.Pipe()
	infoR, infoW, err2 := os.Pipe()
	if err := errors.Join(err1, err2); err != nil {
		for _, f := range []*os.File{errR, errW, infoR, infoW} {
			if f != nil {
				f.Close()
			}
		}
		return nil, fmt.Errorf("start jail: pipes: %w", err)
	}
	files = append(files, errR, errW, infoR, infoW)

	fds := JailFDs{Info: 3, Seccomp: -1}
	extra := []*os.File{infoW} // fd 3
	if prog := seccompProgram(); spec.profile.Seccomp && prog != nil {
		// The program is a few hundred bytes: it fits in the pipe's buffer
		// before bwrap reads it.
		secR, secW, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("start jail: pipes: %w", err)
		}
		_, err = secW.Write(prog)
		secW.Close()
		if err != nil {
			secR.Close()
			closeAll()
			return nil, fmt.Errorf("start jail: seccomp program: %w", err)
		}
		fds.Seccomp = 3 + len(extra)
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
		if err := rn.openShellPipes(&fds); err != nil {
			rn.close()
			rn.bin.Close()
			rn.closeJail()
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
	cmd.Stderr = errW // bwrap's own errors; the runner's go nowhere
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

	j := &jail{cmd: cmd, exited: make(chan struct{})}
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
	}()
	err := <-started
	for _, f := range append([]*os.File{errW}, extra...) { // the child's ends
		f.Close()
	}
	if err != nil {
		eg.close()
		rn.close()
		errR.Close()
		infoR.Close()
		return nil, fmt.Errorf("start jail: %w", err)
	}
	if rn.host != nil {
		j.runner, j.runnerID = rn.connect(), rn.id
		j.pipes, rn.shellHost = rn.shellHost, runner.DriverPipes{}
	}
	if err := eg.attach(); err != nil {
		j.kill()
		errR.Close()
		infoR.Close()
		return nil, fmt.Errorf("start jail: %w", err)
	}

	pid, infoErr := readInfo(infoR)
	infoR.Close()
	if infoErr != nil {
		// bwrap failed before the jail existed; its stderr says why.
		msg, _ := io.ReadAll(io.LimitReader(errR, 4096))
		j.kill()
		errR.Close()
		if m := strings.TrimSpace(string(msg)); m != "" {
			return nil, fmt.Errorf("start jail: %s (run 'warren doctor')", m)
		}
		return nil, fmt.Errorf("start jail: %w (run 'warren doctor')", infoErr)
	}
	j.initPID = pid
	// bwrap may still write a warning; nobody waits on it.
	go func() {
		_, _ = io.Copy(io.Discard, errR)
		errR.Close()
	}()
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

// runnerProc returns the host pid of the jail's runner (the only child of
// the jail's init), or 0 when it is gone. bwrap forks it right after the
// init starts, but on a loaded host that can take a while: wait until it
// shows, the jail ends, or 10 s have passed.
func (j *jail) runnerProc() int {
	j.runnerOnce.Do(func() {
		deadline := time.Now().Add(10 * time.Second)
		for pause := time.Millisecond; time.Now().Before(deadline); pause = min(2*pause, 20*time.Millisecond) {
			if c := runner.Children(j.initPID); len(c) > 0 {
				j.runnerPID = c[0]
				return
			}
			select {
			case <-j.exited:
				return
			case <-time.After(pause):
			}
		}
	})
	return j.runnerPID
}

// shell returns the host pid of the jailed /bin/sh (the runner's child),
// or 0 when none runs.
func (j *jail) shell() int {
	if r := j.runnerProc(); r > 0 {
		if c := runner.Children(r); len(c) > 0 {
			return c[0]
		}
	}
	return 0
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
	if j.remote {
		j.runner.Close() // the runner kills the connection's shell
		<-j.exited
		return
	}
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
	if j.runner != nil {
		j.runner.Close()
	}
	j.closePipes()
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
