package sandbox

import (
	"bytes"
	"context"
	"io"
	"syscall"
	"time"
)

// run is the bookkeeping of one command while it executes.
type run struct {
	nonce  string
	out    [2]*capBuffer
	status []byte // what the status pipe carried since the command began
	// rec is the parsed status record once recOK; both are written by the
	// status pipe's reader under its lock, and read by Exec after drain.
	rec   statusRecord
	recOK bool
	// ended gets a token when the status record is complete: Exec wakes
	// once per command, not once per piece of output.
	ended chan struct{}
}

// script wraps a command in the protocol. The leading `:` lets dash reap
// background jobs that ended while it waited for this line (it looks for
// ended children between commands), so that `kill -0 $!` sees them gone.
// `command eval` keeps the shell
// alive on a syntax error (plain eval would exit dash). The redirections on
// it give the command /dev/null as stdin (off the control pipe) and close
// the status descriptor for the command alone: the command and its
// background jobs cannot write to it, and a command that closes or
// redirects fd 9 changes only its own copy, which the shell restores after.
// Only builtins run after it, so the trailer works with PATH unset or no
// processes left: it restores stdout and stderr from their saved copies
// (7 and 8), in case the command redirected its own with exec (a copy the
// command closed ends the shell here, before the record: the command's
// result then says the shell restarted), and writes
// the status record (`export -p`, then the exit code and the directory,
// framed by the nonce) on fd 9 through stdout, which costs no per-builtin
// redirection. The output streams carry no markers: the status record
// comes after everything the command wrote to them, and Exec drains them
// when it has the record (pipeReader.drain).
func script(command, nonce string) string {
	return ": ; command eval " + shellQuote(command) + " </dev/null 9>&-; " +
		"__warren_status=$?; exec 2>&8 1>&7 1>&9; export -p; " +
		"printf 'W%s %d\\n%s\\nW%sX\\n' " + nonce + " \"$__warren_status\" \"$PWD\" " + nonce + "; exec 1>&7\n"
}

// exec runs command in the shell and returns its result (see Exec). It waits for the
// shell's turn (or fails with ErrBusy under NoWait), starts the jail if
// needed, and returns an error only when the command could not be run. A
// timeout or a cancelled ctx kills the command, not the shell; a command
// that kills the shell gets its result and a fresh shell with the saved
// state.
func (s *Shell) exec(ctx context.Context, command string, opts ExecOptions) (Result, error) {
	if err := validateCommand(command); err != nil {
		return Result{}, err
	}
	if err := s.acquire(ctx, opts.NoWait); err != nil {
		return Result{}, err
	}
	defer s.release()
	s.mu.Lock()
	died := s.jail != nil && !s.jail.alive() // e.g. a background job killed it
	s.mu.Unlock()
	j, err := s.startTraced(ctx)
	if err != nil {
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

	r := &run{nonce: s.nextNonce(), ended: make(chan struct{}, 1)}
	// What the pipes hold now is not this command's: a background job's
	// chatter since the last command, or the rest of an interrupted one.
	for i := range r.out {
		stream := Stream(i + 1)
		buf := newCapBuffer(maxOut)
		r.out[i] = buf
		emit := buf.Write
		if cb := opts.OnOutput; cb != nil {
			emit = func(p []byte) { buf.Write(p); cb(stream, p) }
		}
		j.pipes[i].drain(emit)
	}
	j.pipes[2].drain(func(p []byte) {
		if r.recOK {
			return
		}
		r.status = append(r.status, p...)
		if !bytes.HasSuffix(r.status, []byte("X\n")) {
			return
		}
		if rec, ok, _ := parseStatus(r.status, r.nonce); ok {
			r.rec, r.recOK = rec, true
			select {
			case r.ended <- struct{}{}:
			default:
			}
		}
	})
	defer func() {
		for _, p := range j.pipes {
			p.setFeed(nil)
		}
	}()

	start := now()
	res := Result{}
	// A shell that stopped reading must not hold the turn forever.
	_ = j.stdin.SetWriteDeadline(start.Add(timeout))
	if _, err := io.WriteString(j.stdin, script(command, r.nonce)); err != nil {
		// The shell died between commands: start over once.
		res.ShellRestarted = true
	} else {
		res = s.wait(ctx, j, r, timeout)
		// Children alive now are background jobs: a later timeout spares them.
		if !res.ShellRestarted && mayStartJobs(command) {
			j.background = shellChildren(j.shell())
		}
	}
	res.Duration = now().Sub(start)
	res.ShellRestarted = res.ShellRestarted || died
	s.finish(j, r, opts.OnOutput)
	for i, buf := range r.out {
		if i == 0 {
			res.Stdout, res.StdoutBytes = buf.bytes(), buf.total
		} else {
			res.Stderr, res.StderrBytes = buf.bytes(), buf.total
		}
		res.Truncated = res.Truncated || buf.truncated()
	}

	j.pipes[2].mu.Lock()
	rec, recOK := r.rec, r.recOK
	j.pipes[2].mu.Unlock()
	s.mu.Lock()
	if recOK {
		s.state.Cwd = rec.cwd
		// Most commands export nothing: parse only what changed. State
		// hands out copies, so the map is never written once set.
		if !s.parsed || !bytes.Equal(rec.exports, s.exports) {
			s.state.Env = parseExports(string(rec.exports))
			s.exports, s.parsed = rec.exports, true
		}
	}
	res.Cwd = s.state.Cwd
	if res.Cwd == "" {
		res.Cwd = MountPoint
	}
	s.mu.Unlock()

	if res.ShellRestarted {
		j.kill()
		if _, err := s.ensureJail(); err != nil {
			res.ShellRestarted = false // the next Exec reports why
		}
	}
	return res, nil
}

// complete reports whether the status record has arrived.
func (r *run) complete(j *jail) bool {
	j.pipes[2].mu.Lock()
	defer j.pipes[2].mu.Unlock()
	return r.recOK
}

// collect takes what the output pipes still hold: the command has ended
// (its status record came after everything it wrote) or died.
func (r *run) collect(j *jail) {
	for _, p := range j.pipes[:2] {
		p.drain(nil)
	}
}

// wait collects the command's end: the status record, or the shell's
// death, a timeout or the caller's cancellation.
func (s *Shell) wait(ctx context.Context, j *jail, r *run, timeout time.Duration) Result {
	var res Result
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-r.ended:
		r.collect(j)
		res.ExitCode = r.rec.exitCode
		return res
	case <-j.exited:
		return s.died(j, r, res)
	case <-timer.C:
		res.TimedOut = true
	case <-ctx.Done():
		res.Interrupted = true
	}

	// Timed out or interrupted: kill the command's processes and give the
	// shell a moment to report. An interrupt is polite first (SIGINT, as
	// Ctrl-C would be); a timeout is not.
	shell := j.shell()
	if res.Interrupted && shell > 0 && signalCommand(shell, j.background, syscall.SIGINT) > 0 {
		if s.drain(j, r, quiet) {
			res.ExitCode = r.rec.exitCode
			return res
		}
	}
	if shell > 0 {
		signalCommand(shell, j.background, syscall.SIGKILL)
	}
	if s.drain(j, r, quiet) {
		res.ExitCode = r.rec.exitCode
		return res
	}
	// Nothing to kill, or the shell itself is looping or was replaced by
	// exec: kill the whole jail and start a fresh shell.
	if j.alive() {
		j.kill()
	}
	res.ExitCode = 128 + int(syscall.SIGKILL)
	res.ShellRestarted = true
	j.waitEOF(quiet)
	r.collect(j)
	return res
}

// drain waits up to d for the status record and then takes the rest of
// the output; false when the record did not come.
func (s *Shell) drain(j *jail, r *run, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.ended:
		r.collect(j)
		return true
	case <-j.exited:
		return false
	case <-t.C:
		return false
	}
}

// died finishes a command during which the shell exited (exit, kill -9 $$,
// set -e, exec of a program that ended).
func (s *Shell) died(j *jail, r *run, res Result) Result {
	j.waitEOF(quiet)
	r.collect(j)
	res.ExitCode = j.exitCode
	res.ShellRestarted = true
	return res
}
