package sandbox

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner"
	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// A local jail's commands go between the server and the shell directly:
// the runner starts the shell on pipes the server made when it started the
// jail, and stays its parent (process limit, signals, its end, which ends
// the jail with the shell's status), while the server writes each
// command's script and reads its output and status record with the
// runner's own code (runner.Driver). A command then costs what the shell
// costs, without two more hops through the runner's socket
// (docs/runner-protocol.md, "Where a command's bytes go", has the
// numbers). A runner on the network keeps shell.exec (exec.go).

// attach starts the jail's shell on its pipes and takes the server's
// ends of them. Called with the turn held, before the jail's first
// command.
func (s *Shell) attach(ctx context.Context, j *jail) error {
	actx, cancel := context.WithTimeout(ctx, helloWait)
	defer cancel()
	var res proto.ShellAttachResult
	if err := j.runner.Call(actx, proto.OpShellAttach, proto.ShellAttachArgs{NProc: s.processLimit()}, nil, &res); err != nil {
		if ctx.Err() == nil && actx.Err() != nil {
			return fmt.Errorf("start jail: its runner did not answer within %v (run 'warren doctor')", helloWait)
		}
		return err
	}
	// The shell's pid as this host sees it: the runner's one child. The
	// runner's word (res.PID) is its own namespace's and is not needed.
	pid := j.shell()
	if pid <= 0 {
		return fmt.Errorf("start jail: the runner started no shell")
	}
	// Killed through a pidfd: a shell that has died and been reaped since
	// frees its pid, and a signal by number could reach whatever took it.
	kill := func() { _ = syscall.Kill(pid, syscall.SIGKILL) }
	if pfd, err := unix.PidfdOpen(pid, 0); err == nil {
		pidfd := os.NewFile(uintptr(pfd), "shell-pidfd")
		kill = func() {
			if rc, err := pidfd.SyscallConn(); err == nil {
				_ = rc.Control(func(fd uintptr) { _ = unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0) })
			}
		}
		go func() { <-j.exited; pidfd.Close() }()
	}
	d, err := runner.NewDriver(j.pipes, runner.DriverProc{PID: pid, Exited: j.exited,
		ExitCode: func() int { return j.exitCode }, Kill: kill})
	if err != nil {
		return fmt.Errorf("start jail: the shell's pipes: %w", err)
	}
	j.pipesMu.Lock()
	j.pipes, j.driver = runner.DriverPipes{}, d
	j.pipesMu.Unlock()
	if err := d.Start(s.initScript()); err != nil {
		return fmt.Errorf("start jail: the shell did not take its init script: %w", err)
	}
	return nil
}

// execDirect runs command in the jail's attached shell (see exec). Called
// with the turn held and the jail running.
func (s *Shell) execDirect(ctx context.Context, c *ended, j *jail, command string, timeout time.Duration) (Result, error) {
	if !j.shellUp {
		if err := s.attach(ctx, j); err != nil {
			s.abandon(j)
			return Result{}, err
		}
		j.shellUp = true
	}
	j.pipesMu.Lock()
	d := j.driver
	j.pipesMu.Unlock()
	if d == nil { // the jail was killed since (StopAll)
		return s.complete(c, s.lost(c, Result{}), nil), nil
	}
	args := proto.ShellExecArgs{TimeoutMS: timeout.Milliseconds(), Exports: j.exports}
	rec := func(tag byte, b []byte) {
		switch tag {
		case proto.RecStdout, proto.RecStderr:
			stream := Stream(tag)
			c.out[stream-1].Write(b)
			if cb := c.opts.OnOutput; cb != nil {
				cb(stream, b)
			}
		case proto.RecExports:
			if len(b) <= proto.StatusCap {
				c.exports, c.gotExp = append([]byte(nil), b...), true
			}
		}
	}
	finish := func(rep proto.ShellExecResult) Result {
		res := Result{ExitCode: rep.ExitCode, TimedOut: rep.TimedOut, Interrupted: rep.Interrupted, ShellRestarted: rep.ShellEnded}
		return s.complete(c, res, &rep)
	}
	detachAt := c.opts.DetachAt
	if detachAt.IsZero() || !detachAt.Before(c.start.Add(timeout)) {
		return finish(d.Exec(ctx, args, command, rec)), nil
	}
	// The caller's goroutine waits until detachAt: a short command costs
	// no goroutine (whose stack would grow through the output path).
	rep, done, rest := d.ExecUntil(ctx, args, command, rec, detachAt)
	if done {
		return finish(rep), nil
	}
	if ctx.Err() == nil && j.alive() {
		go func() { c.opts.Detached(finish(rest()), nil) }()
		return Result{}, ErrDetached
	}
	return finish(rest()), nil
}

// direct reports whether the jail's shell runs on the server's pipes
// (attached, or to be attached by its first command).
func (j *jail) direct() bool {
	j.pipesMu.Lock()
	defer j.pipesMu.Unlock()
	return !j.remote && (j.driver != nil || j.pipes.Stdin != nil)
}

// closePipes closes what the server holds of the shell's pipes.
func (j *jail) closePipes() {
	j.pipesMu.Lock()
	defer j.pipesMu.Unlock()
	for _, p := range []*os.File{j.pipes.Stdin, j.pipes.Status, j.pipes.Stdout, j.pipes.Stderr} {
		if p != nil {
			p.Close()
		}
	}
	j.pipes = runner.DriverPipes{}
	if j.driver != nil {
		j.driver.Close()
		j.driver = nil
	}
}
