package runner

import (
	"bytes"
	"context"
	"io"
	"syscall"
	"time"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// run is the bookkeeping of one command while it executes.
type run struct {
	nonce  string
	sink   recorder
	status []byte // what the status pipe carried since the command began
	rec    statusRecord
	recOK  bool // rec holds the command's complete status record
	// statusEOF: the status pipe ended, so the shell has exited (nothing
	// else holds its write end) even if it is not reaped yet.
	statusEOF bool
}

// run runs one command in p and returns its result; its output has gone
// to c's stream as records.
func (s *shellState) run(ctx context.Context, out recorder, p *shellProc, a proto.ShellExecArgs, command string) proto.ShellExecResult {
	res, done, rest := s.runUntil(ctx, out, p, a, command, time.Time{})
	if done {
		return res
	}
	return rest()
}

// runUntil runs one command as run does, but stops waiting for it at
// until (when set, and before the command's deadline): then done is false
// and rest, called once, waits for the command's end and returns its
// result. The caller can then hand rest to another goroutine, and a
// command that ends before until costs none.
func (s *shellState) runUntil(ctx context.Context, out recorder, p *shellProc, a proto.ShellExecArgs, command string, until time.Time) (res proto.ShellExecResult, done bool, rest func() proto.ShellExecResult) {
	timeout := time.Duration(a.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	r := &run{nonce: s.nextNonce(), sink: out}
	// What the pipes hold now is not this command's: a background job's
	// chatter since the last command, or the rest of an interrupted one.
	p.pipes[0].drain(r.sink.feed(proto.RecStdout))
	p.pipes[1].drain(r.sink.feed(proto.RecStderr))
	p.dropStaleStatus()

	deadline := time.Now().Add(timeout)
	// A shell that stopped reading must not hold the command forever.
	_ = p.stdin.SetWriteDeadline(deadline)
	if _, err := io.WriteString(p.stdin, script(command, r.nonce)); err != nil {
		res = r.died(p, res) // the shell died between commands
		return s.finishRun(p, r, a, command, res), true, nil
	}
	if !until.IsZero() && until.Before(deadline) {
		stop := context.AfterFunc(ctx, p.interruptStatus)
		got := r.await(ctx, p, until)
		stop()
		if got {
			r.collect(p)
			res.ExitCode = r.rec.exitCode
			return s.finishRun(p, r, a, command, res), true, nil
		}
		if ctx.Err() == nil && p.alive() && !r.statusEOF && time.Now().After(until) {
			return res, false, func() proto.ShellExecResult {
				return s.finishRun(p, r, a, command, s.wait(ctx, p, r, deadline))
			}
		}
		r.statusEOF = false // wait reads again and learns it anew
	}
	return s.finishRun(p, r, a, command, s.wait(ctx, p, r, deadline)), true, nil
}

// finishRun keeps what the command's end says of the shell and ends its
// output.
func (s *shellState) finishRun(p *shellProc, r *run, a proto.ShellExecArgs, command string, res proto.ShellExecResult) proto.ShellExecResult {
	if !res.ShellEnded && MayStartJobs(command) {
		// Children alive now are background jobs: a later timeout spares them.
		p.background = ShellChildren(p.pid)
	}
	if !r.recOK {
		p.statusDirty = true // a piece of a record may come late
	} else {
		res.Cwd = r.rec.cwd
		res.Exports = s.noteExports(r.rec)
		if res.Exports != a.Exports {
			r.sink.write(proto.RecExports, s.exports)
		}
	}
	for _, pr := range p.pipes {
		pr.setFeed(nil) // collect has fed everything the command wrote
	}
	r.sink.close()
	return res
}

// wait collects the command's end: the status record, or the shell's
// death, a timeout (at deadline) or the server's cancellation.
func (s *shellState) wait(ctx context.Context, p *shellProc, r *run, deadline time.Time) (res proto.ShellExecResult) {
	// A cancelled call moves the deadline to now, which ends the read.
	stop := context.AfterFunc(ctx, p.interruptStatus)
	defer stop()
	if r.await(ctx, p, deadline) {
		r.collect(p)
		res.ExitCode = r.rec.exitCode
		return res
	}
	if r.statusEOF {
		select { // the shell is gone: its reaping follows
		case <-p.exited:
		case <-time.After(quiet):
		}
	}
	switch {
	case !p.alive():
		return r.died(p, res)
	case ctx.Err() != nil:
		res.Interrupted = true
	default:
		// The deadline passed, or the status pipe ended under a live
		// shell, which only a broken protocol explains: either way the
		// command's processes are killed below.
		res.TimedOut = true
	}
	// Timed out or interrupted: kill the command's processes and give the
	// shell a moment to report. An interrupt is polite first (SIGINT, as
	// Ctrl-C would be); a timeout is not.
	if res.Interrupted && signalCommand(p.pid, p.background, syscall.SIGINT) > 0 && r.drain(p, quiet) {
		res.ExitCode = r.rec.exitCode
		return res
	}
	signalCommand(p.pid, p.background, syscall.SIGKILL)
	if r.drain(p, quiet) {
		res.ExitCode = r.rec.exitCode
		return res
	}
	// Nothing to kill, or the shell itself is looping or was replaced by
	// exec: kill it; the server starts a fresh jail.
	p.kill()
	res.ExitCode = 128 + int(syscall.SIGKILL)
	res.ShellEnded = true
	p.waitEOF(quiet)
	r.collect(p)
	r.keepExitOutput(p)
	return res
}

// await reads the status record until deadline; false when it did not
// come (timeout, interruption, the shell's end).
func (r *run) await(ctx context.Context, p *shellProc, deadline time.Time) bool {
	_ = p.status.SetReadDeadline(deadline)
	// A cancellation that came before the deadline was set (its
	// AfterFunc may run first) is not undone by it.
	if ctx != nil && ctx.Err() != nil {
		p.interruptStatus()
	}
	// The shell's end moves the deadline to now (after closing exited): a
	// shell that ended before the deadline above was set is caught here.
	if !p.alive() {
		p.readNow(r.addStatus)
		if rec, ok, _ := parseStatus(r.status, r.nonce); ok {
			r.rec, r.recOK = rec, true
		}
		return r.recOK
	}
	var buf [4096]byte
	for !r.recOK {
		n, err := p.status.Read(buf[:])
		r.addStatus(buf[:n])
		if n > 0 && bytes.HasSuffix(r.status, []byte("X\n")) {
			if rec, ok, _ := parseStatus(r.status, r.nonce); ok {
				r.rec, r.recOK = rec, true
			}
		}
		if err != nil && !r.recOK {
			r.statusEOF = err == io.EOF
			return false
		}
	}
	return true
}

// drain waits up to d for the status record and then takes the rest of
// the output; false when the record did not come.
func (r *run) drain(p *shellProc, d time.Duration) bool {
	if r.await(nil, p, time.Now().Add(d)) {
		r.collect(p)
		return true
	}
	return false
}

// collect takes what the output pipes still hold: the command has ended
// (its status record came after everything it wrote) or died.
func (r *run) collect(p *shellProc) {
	for _, pr := range p.pipes {
		pr.take()
	}
}

// died finishes a command during which the shell exited (exit, kill -9 $$,
// set -e, exec of a program that ended).
func (r *run) died(p *shellProc, res proto.ShellExecResult) proto.ShellExecResult {
	select {
	case <-p.exited:
	case <-time.After(quiet):
	}
	p.waitEOF(quiet)
	r.collect(p)
	res.ExitCode = p.exitCode
	res.ShellEnded = true
	r.keepExitOutput(p)
	return res
}
