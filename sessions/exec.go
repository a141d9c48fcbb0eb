package sessions

import (
	"context"
	"strings"
	"time"

	"github.com/warrenhq/warren/sessions/errs"
)

// A command's life is the manager's, whoever asks for it (the MCP tools,
// the CLI, the agent, the console through MCP): Exec checks the session
// and the usage thresholds, queues the command in its session's one line,
// runs it through the session's Runner, leaves it running as a job when it
// outlives the caller's yield, and saves the shell's cwd and exports when
// it ends.

// ExecOptions tune Manager.Exec. The zero value waits for the end.
type ExecOptions struct {
	// Timeout kills the command after this long; 0: the runner's default.
	Timeout time.Duration
	// Yield is how long the call waits before it returns a command that
	// still runs as a job (Outcome.Running); 0 waits for its end.
	Yield time.Duration
	// Progress receives the chunks produced while this call waits.
	Progress func(Stream, []byte)
	// Log, when set, is asked for the recorder of the command's whole
	// output once its session is known (the activity log); it may return
	// nil.
	Log func(s *Session) OutputLog
}

// OutputLog records a command's output for its whole life, past the call
// that started it.
type OutputLog interface {
	// Output receives each chunk as it is produced.
	Output(stream Stream, chunk []byte)
	// Close runs once all of the output went to Output: before the outcome
	// of the command's end is returned, or when it ends if nobody waits.
	Close()
}

// WaitOptions tune Manager.Wait and Manager.Kill.
type WaitOptions struct {
	// Yield is how long to wait before returning a command that still
	// runs; 0 waits for its end.
	Yield time.Duration
	// Progress receives the chunks produced while this call waits.
	Progress func(Stream, []byte)
}

// Outcome is what a caller of Exec, Wait or Kill learns of a command.
type Outcome struct {
	// Session is the session the command runs in; JobID names it.
	Session *Session
	JobID   string
	// Running: the command still runs (it is left as job JobID). Result
	// then holds the output so far and the shell's cwd.
	Running bool
	// Result is the command's result. After an earlier call returned it
	// running, Stdout and Stderr hold only the output not returned before
	// (its tail past MaxOutput, and Truncated says so).
	Result CommandResult
	// StateErr says why the cwd and exports after the command are not in
	// the database yet (a *NotSavedError; they are retried); nil: saved.
	StateErr error
}

// stateSaveWait is how long a finished command's outcome waits for its
// cwd and exports to reach the database before it says they are not saved
// yet; the write goes on in the background.
const stateSaveWait = 2 * time.Second

// Errors of jobs.
var (
	// ErrJobNotFound: no such job of the caller's (finished and collected,
	// or the server restarted).
	ErrJobNotFound = errs.New(errs.NotFound, "job not found: it finished and its result was already returned, or the server restarted")
	// ErrNothingRunning: Kill found no command running in the session.
	ErrNothingRunning = errs.New(errs.NotFound, "nothing is running in the session")
)

// UsageBlockedError refuses a command because an enforced usage threshold
// is reached for its user or session.
type UsageBlockedError struct {
	Session string
	// Reason is the threshold's message (which threshold, what it counts).
	Reason string
}

func (e *UsageBlockedError) Error() string {
	return "command refused in session " + e.Session + ": " + e.Reason
}

// ErrorCode implements errs.Coder: a configured cap refuses it.
func (e *UsageBlockedError) ErrorCode() errs.Code { return errs.Limit }

// UsageCheck returns why an enforced usage threshold refuses commands of
// user in session, or "" to let them run. It decides itself what a broken
// usage store means (warren lets the command run and logs it).
type UsageCheck func(ctx context.Context, user, session string) (reason string)

// SetUsageCheck sets the check Exec makes before every command: serve and
// the CLI build the meter after the manager.
func (m *Manager) SetUsageCheck(fn UsageCheck) {
	m.mu.Lock()
	m.usageCheck = fn
	m.mu.Unlock()
}

// Exec runs command in user's session id (the default session for "") and
// waits for it up to opts.Yield. Cancelling ctx while it waits interrupts
// the command, not the shell. It refuses an empty command, a session that
// is not active, a session whose commands a usage threshold stops, and a
// command behind one left running as a job (*JobRunningError).
func (m *Manager) Exec(ctx context.Context, user, id, command string, opts ExecOptions) (Outcome, error) {
	switch {
	case strings.TrimSpace(command) == "":
		return Outcome{}, ErrEmptyCommand
	case strings.IndexByte(command, 0) >= 0:
		return Outcome{}, ErrNULInCommand
	}
	m.mu.Lock()
	check := m.usageCheck
	m.mu.Unlock()
	// A refused command starts nothing and creates no session: the check
	// comes before the session is opened when it exists already.
	checked := false
	if check != nil {
		if s, err := m.Lookup(ctx, user, id); err == nil {
			if err := usageRefusal(ctx, check, user, s.ID); err != nil {
				return Outcome{}, err
			}
			checked = true
		}
	}
	s, r, err := m.openCommand(ctx, user, id, command)
	if err != nil {
		return Outcome{}, err
	}
	if check != nil && !checked { // the default session was just made
		if err := usageRefusal(ctx, check, user, s.ID); err != nil {
			return Outcome{}, err
		}
	}
	ro, onDone := RunOptions{Timeout: opts.Timeout}, func() {}
	if opts.Log != nil {
		if l := opts.Log(s); l != nil {
			ro.OnOutput, onDone = l.Output, l.Close
		}
	}
	j, err := m.jobs.start(ctx, user, s, r, command, ro, onDone)
	if err != nil {
		return Outcome{}, err
	}
	return m.await(ctx, j, WaitOptions{Yield: opts.Yield, Progress: opts.Progress}, true)
}

// usageRefusal asks check about user's commands in session.
func usageRefusal(ctx context.Context, check UsageCheck, user, session string) error {
	if reason := check(ctx, user, session); reason != "" {
		return &UsageBlockedError{Session: session, Reason: reason}
	}
	return nil
}

// Job returns user's job id, or nil: another user's job does not exist.
func (m *Manager) Job(user, id string) *Job { return m.jobs.get(user, id) }

// Wait waits for user's job id, up to opts.Yield. Cancelling ctx stops the
// wait, not the command: Kill does that.
func (m *Manager) Wait(ctx context.Context, user, id string, opts WaitOptions) (Outcome, error) {
	j := m.jobs.get(user, id)
	if j == nil {
		return Outcome{}, ErrJobNotFound
	}
	return m.await(ctx, j, opts, false)
}

// Kill interrupts user's job jobID, or without one whatever runs in
// session sessionID, and returns its outcome once it ended. The shell, its
// cwd and exports survive.
func (m *Manager) Kill(ctx context.Context, user, sessionID, jobID string, opts WaitOptions) (Outcome, error) {
	var j *Job
	if jobID != "" {
		if j = m.jobs.get(user, jobID); j == nil {
			return Outcome{}, ErrJobNotFound
		}
	} else {
		s, err := m.Get(ctx, user, sessionID)
		if err != nil {
			return Outcome{}, err
		}
		if j = m.jobs.running(s.ID); j == nil {
			return Outcome{}, errs.Wrap(errs.NotFound, ErrNothingRunning, "nothing is running in session "+s.ID)
		}
	}
	j.cancel()
	return m.await(context.WithoutCancel(ctx), j, WaitOptions{Progress: opts.Progress}, false)
}

// StopCommands interrupts every command, running or queued, and waits a
// moment for them to end (server shutdown), so that their final cwd and
// exports are saved. Later commands still run.
func (m *Manager) StopCommands() { m.jobs.stopAll() }

// await waits for j to end, for the yield to pass, or for the call to be
// cancelled. With interrupt, a cancelled call interrupts the command.
func (m *Manager) await(ctx context.Context, j *Job, opts WaitOptions, interrupt bool) (Outcome, error) {
	j.setListener(opts.Progress)
	defer j.setListener(nil)
	if !m.jobEnded(ctx, j, opts.Yield, interrupt) {
		return m.partial(j), nil
	}
	j.flush() // all the output went to OnOutput before the outcome
	return m.final(j)
}

// jobEnded waits for j: it reports true once j has ended, false when yield
// passed first or the call went away without interrupting it. A job first
// in its session's line runs here, on the call's goroutine (runInline).
func (m *Manager) jobEnded(ctx context.Context, j *Job, yield time.Duration, interrupt bool) bool {
	if j.takeInline() {
		return !m.jobs.runInline(ctx, j, yield, interrupt)
	}
	var yielded <-chan time.Time
	if yield > 0 {
		t := time.NewTimer(yield)
		defer t.Stop()
		yielded = t.C
	}
	select {
	case <-j.done:
	case <-yielded:
		return false
	case <-ctx.Done():
		if !interrupt {
			return false
		}
		j.cancel()
		<-j.done
	}
	return true
}

// partial reports a command that still runs and leaves it running.
func (m *Manager) partial(j *Job) Outcome {
	m.jobs.leave(j)
	out, dropped := j.take()
	return Outcome{Session: j.session, JobID: j.id, Running: true, Result: CommandResult{
		Stdout: out[0], Stderr: out[1], Truncated: dropped[0] > 0 || dropped[1] > 0, Cwd: j.runner.State().Cwd}}
}

// final reports a finished command once its cwd and exports are saved, or
// says they are not saved yet; the error is the runner's, when it could not
// run the command at all.
func (m *Manager) final(j *Job) (Outcome, error) {
	m.jobs.forget(j)
	if j.err != nil {
		return Outcome{}, j.err
	}
	o := Outcome{Session: j.session, JobID: j.id, Result: j.res}
	ctx, cancel := context.WithTimeout(context.Background(), stateSaveWait)
	defer cancel()
	o.StateErr = m.saveState(ctx, j.session, j.runner)
	j.mu.Lock()
	yielded := j.yielded
	j.mu.Unlock()
	if yielded {
		// The caller already has the earlier output: give only the rest.
		out, dropped := j.take()
		o.Result.Stdout, o.Result.Stderr = out[0], out[1]
		o.Result.Truncated = o.Result.Truncated || dropped[0] > 0 || dropped[1] > 0
	}
	return o, nil
}
