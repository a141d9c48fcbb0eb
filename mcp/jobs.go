package mcp

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/events"
)

// job is one command of a session. It runs on a context of its own, not
// the request's, so that it can outlive a call that yielded.
type job struct {
	id      string
	owner   string
	session *sessions.Session
	shell   sessions.Runner
	command string
	opts    sandbox.ExecOptions
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	// res and err are set before done closes.
	res sandbox.Result
	err error

	// mu protects the fields below.
	mu       sync.Mutex
	pending  [2][]byte      // output not yet returned to the caller, tail kept
	dropped  [2]int64       // bytes dropped from the front of pending
	yielded  bool           // a call returned before the end: it is left running as a job
	ended    bool           // the command ended (set before done closes)
	inline   bool           // run by its call's goroutine (runInline), not a runner
	listener *progress      // the call currently waiting, for progress
	log      *events.Stream // the activity log's recorder of the output, or nil
	finished time.Time
}

// output receives the command's output as it is produced.
//
// The chunk goes to the call's progress stream after j's lock is released:
// the stream may wait for a slow client (up to lagWait per chunk), and
// jobs.leave takes j's lock while it holds the lock of every session's
// jobs, so holding it here stalled every user's shell_exec behind one
// client that read its progress slowly.
func (j *job) output(s sandbox.Stream, chunk []byte) {
	j.mu.Lock()
	i := int(s) - 1
	j.pending[i] = append(j.pending[i], chunk...)
	if over := len(j.pending[i]) - sandbox.DefaultMaxOutput; over > 0 {
		// Keep the tail: errors are usually at the end.
		j.pending[i] = append([]byte(nil), j.pending[i][over:]...)
		j.dropped[i] += int64(over)
	}
	listener := j.listener
	j.mu.Unlock()
	listener.add(chunk)
}

// take returns and clears the output not yet returned.
func (j *job) take() (out [2][]byte, dropped [2]int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	out, dropped = j.pending, j.dropped
	j.pending, j.dropped = [2][]byte{}, [2]int64{}
	return out, dropped
}

// setLog attaches the activity log's recorder of j's output.
func (j *job) setLog(s *events.Stream) {
	j.mu.Lock()
	j.log = s
	j.mu.Unlock()
}

// closeLog flushes j's output into the activity log (j has ended).
func (j *job) closeLog() {
	j.mu.Lock()
	s := j.log
	j.mu.Unlock()
	s.Close()
}

// takeInline reports, once, whether j is to run on its call's goroutine:
// a later wait for it (shell_wait) only waits.
func (j *job) takeInline() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	in := j.inline
	j.inline = false
	return in
}

func (j *job) setListener(p *progress) {
	j.mu.Lock()
	j.listener = p
	j.mu.Unlock()
}

func (j *job) isYielded() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.yielded
}

func (j *job) finishedNow() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// busyError refuses a command because the one ahead of it in its session
// was left running as a job: nobody waits for it, so nothing says when the
// shell is free again.
type busyError struct{ session, job string }

func (e *busyError) Error() string {
	return fmt.Sprintf("session %s is busy with job %s, a command left running in the background: wait for it with "+
		"shell_wait {\"job_id\":%q}, stop it with shell_kill, or run this in another session", e.session, e.job, e.job)
}

// jobs tracks the commands of every session. Calls on one session queue in
// arrival order while the command ahead of them belongs to a call that is
// still waiting for it; a call is refused only when a command ahead of it
// was left running as a job (its call yielded).
type jobs struct {
	// onEnd runs when a command ends, before anyone hears of it: it queues
	// the shell's state for saving even if no call collects the result.
	onEnd func(*job)
	// yield is how long shell calls wait before returning a running
	// command as a job; 0 means DefaultYield.
	yield time.Duration

	// mu protects the fields below; wake is closed (and replaced) whenever a
	// line changes or a job is left running, to let waiting jobs re-check.
	mu    sync.Mutex
	byID  map[string]*job
	lines map[string][]*job // per session: unfinished jobs, arrival order; [0] has the shell
	wake  chan struct{}
	// handoff passes a job to an idle runner goroutine (dispatch); closing
	// makes idle runners exit (stopAll).
	handoff chan *job
	closing chan struct{}
	close   sync.Once
}

func newJobs() *jobs {
	return &jobs{byID: map[string]*job{}, lines: map[string][]*job{}, wake: make(chan struct{}), handoff: make(chan *job),
		closing: make(chan struct{})}
}

// start queues a command in its session and returns its job, or refuses it
// with a *busyError. reqCtx is the request's, for its trace.
func (js *jobs) start(reqCtx context.Context, owner string, s *sessions.Session, sh sessions.Runner, command string, opts sandbox.ExecOptions) (*job, error) {
	js.mu.Lock()
	defer js.mu.Unlock()
	js.pruneLocked()
	for _, o := range js.lines[s.ID] {
		if o.isYielded() {
			return nil, &busyError{session: s.ID, job: o.id}
		}
	}
	// The request's trace, not its cancellation: the command's span is a
	// child of the call that started it.
	ctx, cancel := context.WithCancel(trace.ContextWithSpan(context.Background(), trace.SpanFromContext(reqCtx)))
	j := &job{id: "j-" + randomHex(), owner: owner, session: s, shell: sh, command: command,
		opts: opts, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	j.opts.OnOutput = j.output
	if also := opts.OnOutput; also != nil { // the activity log's recorder
		j.opts.OnOutput = func(s sandbox.Stream, chunk []byte) { j.output(s, chunk); also(s, chunk) }
	}
	js.byID[j.id] = j
	// First in line: the call runs the command on its own goroutine
	// (runInline), which spares two goroutine hand-offs per command.
	j.inline = len(js.lines[s.ID]) == 0 // j is not shared yet: no lock needed
	js.lines[s.ID] = append(js.lines[s.ID], j)
	if !j.inline {
		js.dispatch(j)
	}
	return j, nil
}

// runInline runs j, first in its session's line, on the calling goroutine
// until it ends or yield passes; then (detached true) the command goes on
// without it and its end is recorded when it comes. With interrupt, the
// call's cancellation interrupts the command while the call waits.
func (js *jobs) runInline(reqCtx context.Context, j *job, yield time.Duration, interrupt bool) (detached bool) {
	opts := j.opts
	if yield > 0 {
		opts.DetachAt = time.Now().Add(yield)
	}
	opts.Detached = func(res sandbox.Result, err error) { js.end(j, res, err) }
	stop := func() bool { return false }
	if interrupt {
		stop = context.AfterFunc(reqCtx, j.cancel)
	}
	res, err := j.shell.Exec(j.ctx, j.command, opts)
	stop()
	if err == sandbox.ErrDetached {
		return true
	}
	js.end(j, res, err)
	return false
}

// runnerIdle is how long a goroutine that ran a command waits for the
// next one before it exits.
const runnerIdle = time.Minute

// dispatch runs j on a goroutine that ran a command before, or on a new
// one when none is free. A new goroutine's stack is copied each time it
// grows through a command's first call chain, several times per command;
// a kept one has grown already.
func (js *jobs) dispatch(j *job) {
	select {
	case js.handoff <- j:
	default:
		go js.runner(j)
	}
}

// runner runs j, then the jobs handed to it, until none comes for
// runnerIdle or the server stops.
func (js *jobs) runner(j *job) {
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		js.run(j)
		idle.Reset(runnerIdle)
		select {
		case j = <-js.handoff:
		case <-idle.C:
			return
		case <-js.closing:
			return
		}
	}
}

// run waits for j's turn, runs it, and hands the shell to the next job.
func (js *jobs) run(j *job) {
	res, err := sandbox.Result{}, js.turn(j)
	if err == nil {
		res, err = j.shell.Exec(j.ctx, j.command, j.opts)
	} else if j.ctx.Err() != nil {
		// Cancelled (shell_kill, the call went away) before it started.
		res, err = sandbox.Result{ExitCode: 130, Interrupted: true, Cwd: j.shell.State().Cwd}, nil
	}
	js.end(j, res, err)
}

// end records j's outcome and hands the shell to the next job.
func (js *jobs) end(j *job, res sandbox.Result, err error) {
	defer j.cancel()
	js.mu.Lock()
	line := slices.DeleteFunc(js.lines[j.session.ID], func(o *job) bool { return o == j })
	if len(line) == 0 {
		delete(js.lines, j.session.ID)
	} else {
		js.lines[j.session.ID] = line
	}
	js.broadcastLocked()
	js.mu.Unlock()
	if err == nil && js.onEnd != nil {
		js.onEnd(j)
	}
	j.mu.Lock()
	j.res, j.err, j.finished = res, err, time.Now()
	j.ended = true
	left := j.yielded
	j.mu.Unlock()
	if left {
		j.closeLog() // nobody may wait for it: its output is logged now
	}
	close(j.done)
}

// turn waits until j is first in its session's line. It fails when a job
// ahead of j is left running, or when j is cancelled.
func (js *jobs) turn(j *job) error {
	for {
		js.mu.Lock()
		line := js.lines[j.session.ID]
		i := slices.Index(line, j)
		if i == 0 {
			js.mu.Unlock()
			return nil
		}
		for _, o := range line[:i] {
			if o.isYielded() {
				js.mu.Unlock()
				return &busyError{session: j.session.ID, job: o.id}
			}
		}
		wake := js.wake
		js.mu.Unlock()
		select {
		case <-wake:
		case <-j.ctx.Done():
			return j.ctx.Err()
		}
	}
}

func (js *jobs) broadcastLocked() {
	close(js.wake)
	js.wake = make(chan struct{})
}

// leave marks j as left running (its call yielded): calls queued behind it
// are refused with its id instead of waiting for nobody. The activity log
// of a job left running is closed when it ends, by run, or here if it
// ended already: a call that waits for the end closes it itself.
func (js *jobs) leave(j *job) {
	js.mu.Lock()
	j.mu.Lock()
	j.yielded = true
	ended := j.ended
	j.mu.Unlock()
	js.broadcastLocked()
	js.mu.Unlock()
	if ended {
		j.closeLog()
	}
}

// get returns owner's job id; another user's job does not exist.
func (js *jobs) get(owner, id string) *job {
	js.mu.Lock()
	defer js.mu.Unlock()
	j := js.byID[id]
	if j == nil || j.owner != owner {
		return nil
	}
	return j
}

// running returns the job that has session id's shell.
func (js *jobs) running(sessionID string) *job {
	js.mu.Lock()
	defer js.mu.Unlock()
	if line := js.lines[sessionID]; len(line) > 0 {
		return line[0]
	}
	return nil
}

// forget drops a finished job whose result was delivered.
func (js *jobs) forget(j *job) {
	js.mu.Lock()
	delete(js.byID, j.id)
	js.mu.Unlock()
}

// keepFinished is how long an undelivered result stays collectable.
const keepFinished = 30 * time.Minute

func (js *jobs) pruneLocked() {
	for id, j := range js.byID {
		if j.finishedNow() {
			j.mu.Lock()
			old := time.Since(j.finished) > keepFinished
			j.mu.Unlock()
			if old {
				delete(js.byID, id)
			}
		}
	}
}

// stopGrace bounds how long shutdown waits for interrupted commands to end
// (an interrupted command gets half a second before its jail is killed).
const stopGrace = 3 * time.Second

// stopAll interrupts every command, running or queued, and waits a moment
// for them to end (server shutdown): their final cwd and exports are then
// queued for saving before the session manager closes.
func (js *jobs) stopAll() {
	js.close.Do(func() { close(js.closing) })
	js.mu.Lock()
	var all []*job
	for _, line := range js.lines {
		for _, j := range line {
			j.cancel()
			all = append(all, j)
		}
	}
	js.mu.Unlock()
	deadline := time.NewTimer(stopGrace)
	defer deadline.Stop()
	for _, j := range all {
		select {
		case <-j.done:
		case <-deadline.C:
			return
		}
	}
}
