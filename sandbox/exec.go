package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// exec runs command in the shell and returns its result (see Exec). It
// waits for the shell's turn (or fails with ErrBusy under NoWait), starts
// the jail if needed, and hands the command to the jail's runner, which
// owns the shell (proto.OpShellExec): one request, and for a short command
// one reply carrying its output. It returns an error only when the command
// could not be run. A timeout or a cancelled ctx kills the command, not
// the shell; a command that ends the shell gets its result and a fresh
// jail with the saved state.
func (s *Shell) exec(ctx context.Context, command string, opts ExecOptions) (Result, error) {
	if err := validateCommand(command); err != nil {
		return Result{}, err
	}
	if err := s.acquire(ctx, opts.NoWait); err != nil {
		return Result{}, err
	}
	s.mu.Lock()
	died := s.jail != nil && !s.jail.alive() // e.g. a background job ended the shell
	s.mu.Unlock()
	j, err := s.startTraced(ctx)
	if err != nil {
		s.release()
		return Result{}, err
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	maxOut := opts.MaxOutput
	if maxOut <= 0 {
		maxOut = DefaultMaxOutput
	}
	s.stopLeftoversAtLimit(j) // a bomb that filled the jail after its command

	c := &ended{j: j, text: command, opts: opts, died: died, start: now()}
	c.out = [2]*capBuffer{newCapBuffer(maxOut), newCapBuffer(maxOut)}
	if j.direct() {
		return s.execDirect(ctx, c, j, command, timeout)
	}
	args := proto.ShellExecArgs{Length: len(command), TimeoutMS: timeout.Milliseconds(), Exports: j.exports}
	if !j.shellUp {
		args.Init, args.NProc = s.initScript(), s.processLimit()
	}
	if j.runner == nil {
		s.release()
		return Result{}, errNoRunner
	}
	if !j.shellUp {
		// A runner that never says hello must not hold the turn forever.
		hctx, cancel := context.WithTimeout(ctx, helloWait)
		_, err := j.runner.Hello(hctx)
		cancel()
		if err != nil && ctx.Err() == nil && !isDone(j.runner.Done()) {
			s.abandon(j)
			return Result{}, fmt.Errorf("start jail: its runner did not answer within %v (run 'warren doctor')", helloWait)
		}
	}
	st, err := j.runner.Open(ctx, proto.OpShellExec, args, []byte(command))
	if err != nil {
		if ctx.Err() != nil || !isDone(j.runner.Done()) {
			s.release()
			return Result{}, err
		}
		// The runner is gone (its jail ended between the check and now):
		// the command never ran; a fresh jail takes the next one.
		return s.complete(c, s.lost(c, Result{}), nil), nil
	}
	deadline := c.start.Add(timeout)
	rg := s.startReading(c, st, deadline)
	detachAt := opts.DetachAt
	if detachAt.IsZero() || !detachAt.Before(deadline) {
		return s.finishRead(c, rg.read(false))
	}
	// The caller's goroutine reads until detachAt (a timer wakes it), so a
	// short command costs no goroutine of its own.
	wake := time.AfterFunc(time.Until(detachAt), st.Wake)
	o := rg.read(true)
	wake.Stop()
	if !o.woken {
		return s.finishRead(c, o)
	}
	if ctx.Err() == nil && j.alive() {
		go func() { opts.Detached(s.finishRead(c, rg.read(false))) }()
		return Result{}, ErrDetached
	}
	return s.finishRead(c, rg.read(false))
}

// outcome is what read learnt of a command: its result so far, the
// runner's reply, or the runner's refusal.
type outcome struct {
	res   Result
	rep   *proto.ShellExecResult
	err   error
	woken bool // read stopped at the detach time; the command runs on
}

// finishRead completes a command from what read learnt. A runner that
// refused or failed the command (it could not start the shell) loses its
// jail: the next command starts a fresh one.
func (s *Shell) finishRead(c *ended, o outcome) (Result, error) {
	if o.err != nil {
		c.j.stop()
		s.mu.Lock()
		if s.jail == c.j {
			s.jail = nil
		}
		s.mu.Unlock()
		c.j.kill()
		s.release()
		return Result{}, o.err
	}
	return s.complete(c, o.res, o.rep), nil
}

// ended is what complete needs of a command.
type ended struct {
	j     *jail
	text  string
	opts  ExecOptions
	died  bool // the shell had died before the command
	start time.Time
	out   [2]*capBuffer // stdout, stderr
	// exports is the shell's `export -p` when the runner sent it.
	exports []byte
	gotExp  bool
}

// helloWait bounds the wait for a new jail's runner to say hello.
const helloWait = 15 * time.Second

// wedge is how long past a command's timeout the server waits for the
// runner's reply before it takes the runner for wedged and kills the jail:
// the runner's own timeout, its two quiet periods and some slack.
const wedge = 2*quiet + 5*time.Second

// reading is a command's output being read.
type reading struct {
	s        *Shell
	c        *ended
	st       *client.Stream
	rd       recordReader
	wedged   atomic.Bool
	backstop *time.Timer
}

// startReading arms the backstop: a runner that has not replied by the
// command's timeout plus wedge is taken for wedged, and its jail killed.
func (s *Shell) startReading(c *ended, st *client.Stream, deadline time.Time) *reading {
	r := &reading{s: s, c: c, st: st, rd: recordReader{c: c}}
	r.backstop = time.AfterFunc(time.Until(deadline)+wedge, func() {
		r.wedged.Store(true)
		c.j.stop()
	})
	return r
}

// read reads the command's output records and its reply. It returns the
// reply, or none with res saying why (the jail ended, or the runner broke
// the protocol or stopped answering, and the jail was killed), or the
// runner's refusal; with stopOnWake, woken when the stream's Wake came
// first.
func (r *reading) read(stopOnWake bool) outcome {
	s, c, st, j := r.s, r.c, r.st, r.c.j
	for {
		b, err := st.Next()
		if err == client.ErrWoken {
			if stopOnWake {
				return outcome{woken: true}
			}
			continue
		}
		if err != nil {
			break
		}
		if !r.rd.feed(b) {
			r.end()
			j.stop() // a runner that breaks the protocol is not believed again
			return outcome{res: s.lost(c, Result{ExitCode: -1})}
		}
	}
	r.end()
	var rep proto.ShellExecResult
	err := st.Result(&rep)
	if err == nil && r.rd.whole() {
		return outcome{res: Result{ExitCode: rep.ExitCode, TimedOut: rep.TimedOut, Interrupted: rep.Interrupted,
			ShellRestarted: rep.ShellEnded}, rep: &rep}
	}
	if err != nil && !errors.Is(err, client.ErrGone) && !r.wedged.Load() {
		// The runner refused or failed the command (busy; it could not
		// start the shell; an unreadable reply).
		return outcome{err: err}
	}
	res := Result{}
	if r.wedged.Load() {
		res.TimedOut = true
	}
	return outcome{res: s.lost(c, res)}
}

// end stops the backstop and gives the stream up.
func (r *reading) end() {
	r.backstop.Stop()
	r.st.Close()
}

// lost finishes a command whose runner is gone: the jail ended (the
// command killed it, StopAll, the memory limit) or was killed.
func (s *Shell) lost(c *ended, res Result) Result {
	select {
	case <-c.j.exited:
	case <-time.After(quiet):
		c.j.stop()
		<-c.j.exited
	}
	if res.ExitCode == 0 {
		res.ExitCode = c.j.exitCode
	}
	res.ShellRestarted = true
	return res
}

// stop kills the jail's init, and with it everything in the jail; kill
// reaps it later.
func (j *jail) stop() {
	if j.remote {
		go j.runner.Close() // a wedged peer must not hold the caller
		return
	}
	if j.initPID > 0 {
		_ = syscall.Kill(j.initPID, syscall.SIGKILL)
	}
}
