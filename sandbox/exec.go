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
	scan   [2]*markerScanner
	status []byte
	rec    statusRecord
	recOK  bool
	// streamEnd gets a token per stream whose end marker was read;
	// statusEnd one when the status record is complete.
	streamEnd, statusEnd chan struct{}
}

// script wraps a command in the protocol. `command eval` keeps the shell
// alive on a syntax error (plain eval would exit dash); </dev/null keeps the
// command off the control pipe; markers with the nonce frame its output;
// only builtins run after it, so the trailer works with PATH unset or no
// processes left.
func script(command, nonce string) string {
	n := nonce
	return "printf 'W%sS' " + n + "; printf 'W%sS' " + n + " >&2; " +
		"command eval " + shellQuote(command) + " </dev/null; " +
		"__warren_status=$?; exec 1>&7 2>&8; " +
		"printf 'W%sE' " + n + "; printf 'W%sE' " + n + " >&2; " +
		"{ printf 'W%s %d\\n%s\\nW%sP\\n' " + n + " \"$__warren_status\" \"$PWD\" " + n + "; export -p; printf 'W%sX\\n' " + n + "; } >&9\n"
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

	r := &run{nonce: s.nextNonce(), streamEnd: make(chan struct{}, 2), statusEnd: make(chan struct{}, 1)}
	for i := range r.scan {
		stream := Stream(i + 1)
		buf := newCapBuffer(maxOut)
		r.out[i] = buf
		emit := buf.Write
		if cb := opts.OnOutput; cb != nil {
			emit = func(p []byte) { buf.Write(p); cb(stream, p) }
		}
		r.scan[i] = &markerScanner{
			start: []byte("W" + r.nonce + "S"),
			end:   []byte("W" + r.nonce + "E"),
			emit:  emit,
		}
		scan := r.scan[i]
		j.pipes[i].setFeed(func(p []byte) {
			if scan.phase != finished && scan.feed(p) {
				r.streamEnd <- struct{}{}
			}
		})
	}
	j.pipes[2].setFeed(func(p []byte) {
		if r.recOK {
			return
		}
		r.status = append(r.status, p...)
		if !bytes.HasSuffix(r.status, []byte("X\n")) {
			return
		}
		if rec, ok, _ := parseStatus(r.status, r.nonce); ok {
			r.rec, r.recOK = rec, true
			r.statusEnd <- struct{}{}
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
		s.state = State{Cwd: rec.cwd, Env: rec.env}
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

// statusGrace is how long the status record may lag behind both end
// markers. It is written right after them; when it does not come, the
// command closed or redirected the status descriptor (exec 9>&-).
const statusGrace = time.Second

// progress counts what has arrived of a command's end.
type progress struct {
	streams int  // end markers read, of 2
	status  bool // status record read
}

func (p progress) complete() bool { return p.streams == 2 && p.status }

// wait collects the command's end: both end markers and the status record,
// or the shell's death, a timeout or the caller's cancellation.
func (s *Shell) wait(ctx context.Context, j *jail, r *run, timeout time.Duration) Result {
	var res Result
	var got progress
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var lost <-chan time.Time
	for !got.complete() {
		select {
		case <-r.streamEnd:
			if got.streams++; got.streams == 2 && !got.status {
				lost = time.After(statusGrace)
			}
			continue
		case <-r.statusEnd:
			got.status = true
			continue
		case <-lost:
			// The command broke the protocol: its exit status is lost.
			// Start a fresh shell with the state saved before it.
			j.kill()
			res.ExitCode, res.ShellRestarted = -1, true
			return res
		case <-j.exited:
			return s.died(j, r, res)
		case <-timer.C:
			res.TimedOut = true
		case <-ctx.Done():
			res.Interrupted = true
		}
		break
	}
	if got.complete() {
		res.ExitCode = r.rec.exitCode
		return res
	}

	// Timed out or interrupted: kill the command's processes and give the
	// shell a moment to report. An interrupt is polite first (SIGINT, as
	// Ctrl-C would be); a timeout is not.
	shell := j.shell()
	if res.Interrupted && shell > 0 && signalCommand(shell, j.background, syscall.SIGINT) > 0 {
		if s.drain(j, r, &got, quiet) {
			res.ExitCode = r.rec.exitCode
			return res
		}
	}
	if shell > 0 {
		signalCommand(shell, j.background, syscall.SIGKILL)
	}
	if s.drain(j, r, &got, quiet) {
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
	r.flush(j)
	return res
}

// drain waits up to d for the rest of the command's end; false when it did
// not all come.
func (s *Shell) drain(j *jail, r *run, got *progress, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for !got.complete() {
		select {
		case <-r.streamEnd:
			got.streams++
		case <-r.statusEnd:
			got.status = true
		case <-j.exited:
			return false
		case <-t.C:
			return false
		}
	}
	return true
}

// died finishes a command during which the shell exited (exit, kill -9 $$,
// set -e, exec of a program that ended).
func (s *Shell) died(j *jail, r *run, res Result) Result {
	j.waitEOF(quiet)
	r.flush(j)
	res.ExitCode = j.exitCode
	res.ShellRestarted = true
	return res
}

// flush hands over output held back while looking for an end marker that
// will never come.
func (r *run) flush(j *jail) {
	for i, sc := range r.scan {
		j.pipes[i].mu.Lock()
		sc.flush()
		j.pipes[i].mu.Unlock()
	}
}
