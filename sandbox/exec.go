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
	emit   func([]byte) // feeds out[0] and the caller's OnOutput
	status []byte       // what the status pipe carried since the command began
	rec    statusRecord
	recOK  bool // rec holds the command's complete status record
	// statusEOF: the status pipe ended, so the shell has exited (nothing
	// else holds its write end) even if bwrap is not reaped yet.
	statusEOF bool
}

// readStatus reads the status pipe until the command's record is complete
// (true) or a read fails (false): the deadline passed or was moved to
// interrupt the wait, the pipe ended, or the jail is gone. Exec reads it
// itself rather than through a goroutine: the goroutine that waits is the
// one that wakes when the record arrives.
func (r *run) readStatus(j *jail) bool {
	var buf [4096]byte
	for !r.recOK {
		n, err := j.status.Read(buf[:])
		r.addStatus(j, buf[:n])
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

// script wraps a command in the protocol. Between commands the shell's
// stdout is the status pipe; 6 is /dev/null, 7 and 8 the output pipes.
//
// The leading `:` lets dash reap background jobs that ended while it
// waited for this line (it looks for ended children between commands), so
// that `kill -0 $!` sees them gone. `command eval` keeps the shell alive on
// a syntax error (plain eval would exit dash). Its redirections give the
// command /dev/null as stdin (off the control pipe) and the stdout pipe as
// stdout, and make whatever the command does to descriptors 0 and 1 (exec
// >file, exec 0<&-) its own: the shell restores them after, so the command
// cannot reach the control or status pipe by those numbers, and a
// background job never holds either. Descriptor 2 is the stderr pipe
// throughout, so the trailer's exec puts it back (2>&8) instead of a third
// saved redirection: dash spends six system calls on a saved redirection
// and four on an exec's of descriptor 2, which checks 8 at the same time
// (24 system calls per `echo hi`, from 26).
// Only builtins run after the command, so the trailer works with PATH
// unset or no processes left. Its exec also checks that the command left
// 6, 7 and 8 open (a failed redirection of exec ends the shell, before the
// record: the command's result then says the shell restarted; a restart is
// all such a command costs), then it writes the status record (`export
// -p`, then the exit code and the directory, framed by the nonce) to its
// stdout without a redirection per builtin. The output pipes carry no
// markers: the record comes after everything the command wrote to them,
// and Exec drains them once it has the record (pipeReader.drain).
// Redirections cost several system calls each, every one through the
// jail's seccomp filter; this is the cheapest form that keeps these
// guarantees.
func script(command, nonce string) string {
	return ": ; command eval " + shellQuote(command) + " <&6 >&7; __warren_status=$?; " +
		"exec 2>&8 9<&6 9>&7 9>&-; export -p; " +
		"printf 'W%s %d\\n%s\\nW%sX\\n' " + nonce + " \"$__warren_status\" \"$PWD\" " + nonce + "\n"
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
	s.mu.Lock()
	died := s.jail != nil && !s.jail.alive() // e.g. a background job killed it
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

	r := &run{nonce: s.nextNonce()}
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
		if i == 0 {
			r.emit = emit
		}
	}
	j.dropStaleStatus()
	s.stopLeftoversAtLimit(j) // a bomb that filled the jail after its command

	c := &ended{j: j, r: r, text: command, opts: opts, died: died, start: now()}
	deadline := c.start.Add(timeout)
	// A shell that stopped reading must not hold the turn forever.
	_ = j.stdin.SetWriteDeadline(deadline)
	if _, err := io.WriteString(j.stdin, script(command, r.nonce)); err != nil {
		// The shell died between commands: start over once.
		return s.complete(c, Result{ShellRestarted: true}), nil
	}
	res, detached := s.wait(ctx, j, r, deadline, opts.DetachAt)
	if detached {
		go func() {
			res, _ := s.wait(ctx, j, r, deadline, time.Time{})
			opts.Detached(s.complete(c, res), nil)
		}()
		return Result{}, ErrDetached
	}
	return s.complete(c, res), nil
}

// ended is what complete needs of a command that has ended.
type ended struct {
	j     *jail
	r     *run
	text  string
	opts  ExecOptions
	died  bool // the shell had died before the command
	start time.Time
}

// complete finishes a command that has ended (wait's res): it reads its
// output and the shell's state, restarts a shell it killed, and hands the
// shell's turn on.
func (s *Shell) complete(c *ended, res Result) Result {
	defer s.release()
	j, r, opts := c.j, c.r, c.opts
	defer func() {
		for _, p := range j.pipes {
			p.setFeed(nil)
		}
	}()
	// Children alive now are background jobs: a later timeout spares them.
	if !res.ShellRestarted && mayStartJobs(c.text) {
		j.background = shellChildren(j.shell())
	}
	res.Duration = now().Sub(c.start)
	died := c.died
	res.ShellRestarted = res.ShellRestarted || died
	// A command that hit the jail's process limit shows it (a refused fork
	// is an error on stderr, or a failed status) or started jobs: its
	// leftovers are looked for now, so that its own result says so. Any
	// other command's are looked for before the next one: one read of
	// pids.events per command instead of two (about 7 µs of a shell_exec).
	if !res.ShellRestarted && (res.ExitCode != 0 || r.out[1].total > 0 || mayStartJobs(c.text)) {
		s.stopLeftoversAtLimit(j)
	}
	s.finish(j, r, opts.OnOutput)
	for i, buf := range r.out {
		if i == 0 {
			res.Stdout, res.StdoutBytes = buf.bytes(), buf.total
		} else {
			res.Stderr, res.StderrBytes = buf.bytes(), buf.total
		}
		res.Truncated = res.Truncated || buf.truncated()
	}

	if !r.recOK {
		j.statusDirty = true // a piece of a record may come late
	}
	s.mu.Lock()
	if r.recOK {
		if s.state.Cwd != r.rec.cwd {
			s.state.Cwd = r.rec.cwd
			s.stateVersion++
		}
		// Most commands export nothing: parse only what changed. State
		// hands out copies, so the map is never written once set.
		if !s.parsed || !bytes.Equal(r.rec.exports, s.exports) {
			s.state.Env = parseExports(string(r.rec.exports))
			s.exports, s.parsed = r.rec.exports, true
			s.stateVersion++
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
	return res
}

// collect takes what the output pipes still hold: the command has ended
// (its status record came after everything it wrote) or died.
func (r *run) collect(j *jail) {
	for _, p := range j.pipes {
		p.drain(nil)
	}
}

// wait collects the command's end: the status record, or the shell's
// death, a timeout (at deadline) or the caller's cancellation. With
// detachAt before deadline, a command still running then is left to run:
// detached is true and nothing was collected.
func (s *Shell) wait(ctx context.Context, j *jail, r *run, deadline, detachAt time.Time) (res Result, detached bool) {
	// A cancelled call moves the deadline to now, which ends the read.
	stop := context.AfterFunc(ctx, j.interruptStatus)
	defer stop()
	until := deadline
	detaching := !detachAt.IsZero() && detachAt.Before(deadline)
	if detaching {
		until = detachAt
	}
	if s.await(j, r, until) {
		r.collect(j)
		res.ExitCode = r.rec.exitCode
		return res, false
	}
	if detaching && ctx.Err() == nil && !r.statusEOF && j.alive() && !now().Before(detachAt) {
		return Result{}, true
	}
	if r.statusEOF {
		select { // the shell is gone: bwrap follows
		case <-j.exited:
		case <-time.After(quiet):
		}
	}
	switch {
	case !j.alive():
		return s.died(j, r, res), false
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
	shell := j.shell()
	if res.Interrupted && shell > 0 && signalCommand(shell, j.background, syscall.SIGINT) > 0 {
		if s.drain(j, r, quiet) {
			res.ExitCode = r.rec.exitCode
			return res, false
		}
	}
	if shell > 0 {
		signalCommand(shell, j.background, syscall.SIGKILL)
	}
	if s.drain(j, r, quiet) {
		res.ExitCode = r.rec.exitCode
		return res, false
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
	r.keepExitOutput(j)
	return res, false
}

// await reads the status record until deadline; false when it did not
// come (timeout, interruption, the jail's end).
func (s *Shell) await(j *jail, r *run, deadline time.Time) bool {
	_ = j.status.SetReadDeadline(deadline)
	// The jail's end moves the deadline to now (after closing exited): a
	// jail that ended before the deadline above was set is caught here.
	if !j.alive() {
		return r.readStatusNow(j)
	}
	return r.readStatus(j)
}

// readStatusNow takes what a jail that has ended left in the status pipe.
func (r *run) readStatusNow(j *jail) bool {
	j.readNow(func(p []byte) { r.addStatus(j, p) })
	if rec, ok, _ := parseStatus(r.status, r.nonce); ok {
		r.rec, r.recOK = rec, true
	}
	return r.recOK
}

// drain waits up to d for the status record and then takes the rest of
// the output; false when the record did not come.
func (s *Shell) drain(j *jail, r *run, d time.Duration) bool {
	if s.await(j, r, now().Add(d)) {
		r.collect(j)
		return true
	}
	return false
}

// died finishes a command during which the shell exited (exit, kill -9 $$,
// set -e, exec of a program that ended).
func (s *Shell) died(j *jail, r *run, res Result) Result {
	j.waitEOF(quiet)
	r.collect(j)
	res.ExitCode = j.exitCode
	res.ShellRestarted = true
	r.keepExitOutput(j)
	return res
}
