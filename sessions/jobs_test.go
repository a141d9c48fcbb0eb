package sessions

import (
	"runtime"
	"testing"
	"time"
)

// TestAStalledProgressListenerHoldsNoSharedLock: a command whose caller
// reads its progress slower than the command writes waits for the caller;
// meanwhile the jobs of every session must stay usable. Leaving a job
// running (the yield of its call) takes the lock of every session's jobs:
// it must complete while the output is still held up by the stalled
// listener, or every user's commands wait for one client.
func TestAStalledProgressListenerHoldsNoSharedLock(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	js := newJobs(nil)
	j := &Job{id: "j-test", done: make(chan struct{})}
	j.setListener(func(Stream, []byte) { <-release }) // a client that stopped reading
	go j.output(Stdout, []byte("x"))
	// Wait until the chunk is the job's: the output call then waits for
	// the listener (or holds the job's lock across it).
	for {
		j.mu.Lock()
		n := len(j.pending[0])
		j.mu.Unlock()
		if n == 1 {
			break
		}
		runtime.Gosched()
	}
	left := make(chan struct{})
	go func() {
		defer close(left)
		js.leave(j)
	}()
	select {
	case <-left:
	case <-time.After(time.Minute): // a hang, not a speed: leave takes no time at all
		t.Fatal("leaving the job running waited for its stalled progress listener, holding every session's jobs")
	}
}
