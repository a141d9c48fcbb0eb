package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions"
)

// job is one command running in a session's shell. It runs on a context of
// its own, not the request's, so that it can outlive a call that yielded.
type job struct {
	id      string
	owner   string
	session *sessions.Session
	shell   *sandbox.Shell
	cancel  context.CancelFunc
	done    chan struct{}
	// res and err are set before done closes.
	res sandbox.Result
	err error

	// mu protects the fields below.
	mu       sync.Mutex
	pending  [2][]byte // output not yet returned to the caller, tail kept
	dropped  [2]int64  // bytes dropped from the front of pending
	yielded  bool      // a call returned before the end: report pending, not res
	listener *progress // the call currently waiting, for progress
	finished time.Time
}

// output receives the command's output as it is produced.
func (j *job) output(s sandbox.Stream, chunk []byte) {
	j.mu.Lock()
	defer j.mu.Unlock()
	i := int(s) - 1
	j.pending[i] = append(j.pending[i], chunk...)
	if over := len(j.pending[i]) - sandbox.DefaultMaxOutput; over > 0 {
		// Keep the tail: errors are usually at the end.
		j.pending[i] = append([]byte(nil), j.pending[i][over:]...)
		j.dropped[i] += int64(over)
	}
	j.listener.add(chunk)
}

// take returns and clears the output not yet returned.
func (j *job) take() (out [2][]byte, dropped [2]int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	out, dropped = j.pending, j.dropped
	j.pending, j.dropped = [2][]byte{}, [2]int64{}
	return out, dropped
}

func (j *job) setListener(p *progress) {
	j.mu.Lock()
	j.listener = p
	j.mu.Unlock()
}

func (j *job) finishedNow() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// jobs tracks running commands: at most one per session, so that a second
// call on a busy session is refused with the id of the command in the way.
type jobs struct {
	// mu protects the maps.
	mu        sync.Mutex
	byID      map[string]*job
	bySession map[string]*job // the running job of each session
}

func newJobs() *jobs {
	return &jobs{byID: map[string]*job{}, bySession: map[string]*job{}}
}

// start registers and starts a command, or returns the job already running
// in the session.
func (js *jobs) start(owner string, s *sessions.Session, sh *sandbox.Shell, command string, opts sandbox.ExecOptions) (*job, *job) {
	js.mu.Lock()
	defer js.mu.Unlock()
	js.pruneLocked()
	if running := js.bySession[s.ID]; running != nil {
		return nil, running
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	ctx, cancel := context.WithCancel(context.Background())
	j := &job{id: "j-" + hex.EncodeToString(b[:]), owner: owner, session: s, shell: sh,
		cancel: cancel, done: make(chan struct{})}
	js.byID[j.id] = j
	js.bySession[s.ID] = j
	opts.OnOutput = j.output
	go func() {
		defer cancel()
		res, err := sh.Exec(ctx, command, opts)
		js.mu.Lock()
		if js.bySession[s.ID] == j {
			delete(js.bySession, s.ID)
		}
		js.mu.Unlock()
		j.mu.Lock()
		j.res, j.err, j.finished = res, err, time.Now()
		j.mu.Unlock()
		close(j.done)
	}()
	return j, nil
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

// running returns the job running in session id.
func (js *jobs) running(sessionID string) *job {
	js.mu.Lock()
	defer js.mu.Unlock()
	return js.bySession[sessionID]
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

// stopAll interrupts every running command (server shutdown).
func (js *jobs) stopAll() {
	js.mu.Lock()
	defer js.mu.Unlock()
	for _, j := range js.bySession {
		j.cancel()
	}
}
