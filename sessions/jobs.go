package sessions

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/warrenhq/warren/sessions/errs"
)

// Job is one command of a session. It runs on a context of its own, not
// its caller's, so that it can outlive a call that yielded (Manager.Exec
// with ExecOptions.Yield): then it has an id, and Manager.Wait and
// Manager.Kill find it by that id.
type Job struct {
	id      string
	owner   string
	session *Session
	runner  Runner
	command string
	opts    RunOptions
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	onDone  func() // the OutputLog's Close, at most once (flush)
	flushed sync.Once
	// res and err are set before done closes.
	res CommandResult
	err error

	// mu protects the fields below.
	mu       sync.Mutex
	pending  [2][]byte            // output not yet returned to a caller, tail kept
	dropped  [2]int64             // bytes dropped from the front of pending
	yielded  bool                 // a call returned before the end: it is left running
	ended    bool                 // the command ended (set before done closes)
	inline   bool                 // run by its call's goroutine (runInline), not a worker
	listener func(Stream, []byte) // the call currently waiting, for progress
	finished time.Time
}

// ID is the job's id, for Manager.Wait and Manager.Kill.
func (j *Job) ID() string { return j.id }

// Session is the session the job runs in.
func (j *Job) Session() *Session { return j.session }

// output receives the command's output as it is produced.
//
// The chunk goes to the waiting call's listener after j's lock is
// released: the listener may wait for a slow client, and jobs.leave takes
// j's lock while it holds the lock of every session's jobs, so holding it
// here would stall every user's commands behind one client that reads its
// progress slowly.
func (j *Job) output(s Stream, chunk []byte) {
	j.mu.Lock()
	i := int(s) - 1
	j.pending[i] = append(j.pending[i], chunk...)
	if over := len(j.pending[i]) - MaxOutput; over > 0 {
		// Keep the tail: errors are usually at the end.
		j.pending[i] = append([]byte(nil), j.pending[i][over:]...)
		j.dropped[i] += int64(over)
	}
	listener := j.listener
	j.mu.Unlock()
	if listener != nil {
		listener(s, chunk)
	}
}

// take returns and clears the output not yet returned.
func (j *Job) take() (out [2][]byte, dropped [2]int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	out, dropped = j.pending, j.dropped
	j.pending, j.dropped = [2][]byte{}, [2]int64{}
	return out, dropped
}

// flush closes j's output log once: all of its output was delivered.
func (j *Job) flush() {
	j.flushed.Do(func() {
		if j.onDone != nil {
			j.onDone()
		}
	})
}

// takeInline reports, once, whether j is to run on its call's goroutine:
// a later wait for it only waits.
func (j *Job) takeInline() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	in := j.inline
	j.inline = false
	return in
}

func (j *Job) setListener(fn func(Stream, []byte)) {
	j.mu.Lock()
	j.listener = fn
	j.mu.Unlock()
}

func (j *Job) isYielded() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.yielded
}

func (j *Job) finishedNow() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// JobRunningError refuses a command because the one ahead of it in its
// session was left running as a job: nobody waits for it, so nothing says
// when the shell is free again.
type JobRunningError struct{ Session, Job string }

func (e *JobRunningError) Error() string {
	return fmt.Sprintf("session %s is busy with job %s, a command left running in the background: wait for it "+
		"(job_id %q), stop it, or run this in another session", e.Session, e.Job, e.Job)
}

// ErrorCode implements errs.Coder.
func (e *JobRunningError) ErrorCode() errs.Code { return errs.Busy }

// jobs tracks the commands of every session: ONE queue per session. Calls
// on one session queue in arrival order while the command ahead of them
// belongs to a call that is still waiting for it; a call is refused only
// when a command ahead of it was left running as a job (its call yielded).
type jobs struct {
	// onEnd runs when a command ends, before anyone hears of it: it queues
	// the shell's state for saving even if no call collects the result.
	onEnd func(*Job)

	// mu protects the fields below; wake is closed (and replaced) whenever a
	// line changes or a job is left running, to let waiting jobs re-check.
	mu    sync.Mutex
	byID  map[string]*Job
	lines map[string][]*Job // per session: unfinished jobs, arrival order; [0] has the shell
	wake  chan struct{}
	// handoff passes a job to an idle worker goroutine (dispatch); closing
	// makes idle workers exit (stopAll).
	handoff chan *Job
	closing chan struct{}
	close   sync.Once
}

func newJobs(onEnd func(*Job)) *jobs {
	return &jobs{onEnd: onEnd, byID: map[string]*Job{}, lines: map[string][]*Job{}, wake: make(chan struct{}),
		handoff: make(chan *Job), closing: make(chan struct{})}
}

// jobID is 12 hex digits from the runtime's per-thread ChaCha8: unique,
// not secret (a job is found only with its owner).
func jobID() string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], mrand.Uint64()) //nolint:gosec // an id, not a secret
	return "j-" + hex.EncodeToString(b[:6])
}

// start queues a command in its session and returns its job, or refuses it
// with a *JobRunningError. reqCtx is the caller's, for its trace.
func (js *jobs) start(reqCtx context.Context, owner string, s *Session, r Runner, command string, opts RunOptions, onDone func()) (*Job, error) {
	js.mu.Lock()
	defer js.mu.Unlock()
	js.pruneLocked()
	for _, o := range js.lines[s.ID] {
		if o.isYielded() {
			return nil, &JobRunningError{Session: s.ID, Job: o.id}
		}
	}
	// The caller's trace, not its cancellation: the command's span is a
	// child of the call that started it.
	ctx, cancel := context.WithCancel(trace.ContextWithSpan(context.Background(), trace.SpanFromContext(reqCtx)))
	j := &Job{id: jobID(), owner: owner, session: s, runner: r, command: command,
		opts: opts, ctx: ctx, cancel: cancel, done: make(chan struct{}), onDone: onDone}
	j.opts.OnOutput = j.output
	if also := opts.OnOutput; also != nil { // e.g. the activity log's recorder
		j.opts.OnOutput = func(s Stream, chunk []byte) { j.output(s, chunk); also(s, chunk) }
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
func (js *jobs) runInline(reqCtx context.Context, j *Job, yield time.Duration, interrupt bool) (detached bool) {
	opts := j.opts
	if yield > 0 {
		opts.DetachAt = time.Now().Add(yield)
	}
	opts.Detached = func(res CommandResult, err error) { js.end(j, res, err) }
	stop := func() bool { return false }
	if interrupt {
		stop = context.AfterFunc(reqCtx, j.cancel)
	}
	res, err := j.runner.Exec(j.ctx, j.command, opts)
	stop()
	if err == ErrDetached {
		return true
	}
	js.end(j, res, err)
	return false
}

// workerIdle is how long a goroutine that ran a command waits for the
// next one before it exits.
const workerIdle = time.Minute

// dispatch runs j on a goroutine that ran a command before, or on a new
// one when none is free. A new goroutine's stack is copied each time it
// grows through a command's first call chain, several times per command;
// a kept one has grown already.
func (js *jobs) dispatch(j *Job) {
	select {
	case js.handoff <- j:
	default:
		go js.worker(j)
	}
}

// worker runs j, then the jobs handed to it, until none comes for
// workerIdle or the manager closes.
func (js *jobs) worker(j *Job) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		js.run(j)
		idle.Reset(workerIdle)
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
func (js *jobs) run(j *Job) {
	res, err := CommandResult{}, js.turn(j)
	if err == nil {
		res, err = j.runner.Exec(j.ctx, j.command, j.opts)
	} else if j.ctx.Err() != nil {
		// Cancelled (killed, the call went away) before it started.
		res, err = CommandResult{ExitCode: 130, Interrupted: true, Cwd: j.runner.State().Cwd}, nil
	}
	js.end(j, res, err)
}

// end records j's outcome and hands the shell to the next job.
func (js *jobs) end(j *Job, res CommandResult, err error) {
	defer j.cancel()
	js.mu.Lock()
	line := slices.DeleteFunc(js.lines[j.session.ID], func(o *Job) bool { return o == j })
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
		j.flush() // nobody may wait for it: its output is complete now
	}
	close(j.done)
}

// turn waits until j is first in its session's line. It fails when a job
// ahead of j is left running, or when j is cancelled.
func (js *jobs) turn(j *Job) error {
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
				return &JobRunningError{Session: j.session.ID, Job: o.id}
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
// are refused with its id instead of waiting for nobody. Its output is
// flushed when it ends, by end, or here if it ended already: a call that
// waits for the end flushes it itself.
func (js *jobs) leave(j *Job) {
	js.mu.Lock()
	j.mu.Lock()
	j.yielded = true
	ended := j.ended
	j.mu.Unlock()
	js.broadcastLocked()
	js.mu.Unlock()
	if ended {
		j.flush()
	}
}

// get returns owner's job id; another user's job does not exist.
func (js *jobs) get(owner, id string) *Job {
	js.mu.Lock()
	defer js.mu.Unlock()
	j := js.byID[id]
	if j == nil || j.owner != owner {
		return nil
	}
	return j
}

// running returns the job that has session id's shell.
func (js *jobs) running(sessionID string) *Job {
	js.mu.Lock()
	defer js.mu.Unlock()
	if line := js.lines[sessionID]; len(line) > 0 {
		return line[0]
	}
	return nil
}

// forget drops a finished job whose result was delivered.
func (js *jobs) forget(j *Job) {
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
// for them to end (shutdown): their final cwd and exports are then queued
// for saving before the manager closes the runners.
func (js *jobs) stopAll() {
	js.close.Do(func() { close(js.closing) })
	js.mu.Lock()
	var all []*Job
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
