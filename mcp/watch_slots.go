package mcp

import (
	"fmt"
	"sync"

	"github.com/warrenhq/warren/sessions/errs"
)

// watchSlots bounds each user's session_watch calls in flight
// (maxWatchesPerUser), so that one user's long polls cannot hold the
// server's memory or requests for everyone. The zero value is ready.
type watchSlots struct {
	// mu protects n.
	mu sync.Mutex
	n  map[string]int // user -> calls in flight
}

// acquire takes one of user's slots, or refuses with a limit error that
// names the cap; release gives it back.
func (w *watchSlots) acquire(user string) (release func(), err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n[user] >= maxWatchesPerUser {
		return nil, errs.New(errs.Limit, fmt.Sprintf("limit: you have %d session_watch calls running, the most one user may (%d): "+
			"let one return or cancel it before starting another (a long poll returns by its wait_ms)", w.n[user], maxWatchesPerUser))
	}
	if w.n == nil {
		w.n = map[string]int{}
	}
	w.n[user]++
	return sync.OnceFunc(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.n[user]--; w.n[user] <= 0 {
			delete(w.n, user)
		}
	}), nil
}
