package sessions

import (
	"context"
	"sort"
	"time"
)

// StartReaper stops idle shells (Config.IdleTimeout) and shells of sessions
// that another process (the CLI) paused, archived or deleted, until ctx
// ends or the Manager closes. A stopped shell restarts on its next command
// with its saved cwd and exports.
func (m *Manager) StartReaper(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	m.mu.Lock()
	m.stopReaper = cancel
	m.mu.Unlock()
	every := 30 * time.Second
	if t := m.cfg.IdleTimeout / 4; t > 0 && t < every {
		every = max(t, 100*time.Millisecond)
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				m.Reap(ctx)
			}
		}
	}()
}

// Reap runs one pass of the reaper and returns how many jails it stopped.
func (m *Manager) Reap(ctx context.Context) int {
	type cand struct {
		id string
		l  *live
		s  *Session
	}
	m.mu.Lock()
	var cands []cand
	for id, l := range m.live {
		cands = append(cands, cand{id, l, m.known[id]})
	}
	m.mu.Unlock()
	stopped := 0
	now := m.now()
	for _, c := range cands {
		if c.s != nil {
			_ = m.refresh(ctx, c.s) // stops the shell if the state changed
		}
		if !c.l.sh.Running() || c.l.sh.Busy() {
			continue
		}
		m.mu.Lock()
		idle := now.Sub(c.l.lastUsed)
		m.mu.Unlock()
		if m.cfg.IdleTimeout > 0 && idle >= m.cfg.IdleTimeout {
			m.stopIdle(c.s, c.l)
			stopped++
		}
	}
	return stopped
}

// stopIdle queues an idle shell's state for saving and stops its jail; the
// state stays in the session meanwhile, and the saver retries until it is
// written.
func (m *Manager) stopIdle(s *Session, l *live) {
	if s != nil {
		m.queueState(s, l.sh)
	}
	l.sh.Stop() // does nothing if a command started meanwhile
}

// makeRoom keeps the running jails under Config.MaxRunningShells, counting
// the one session id is about to start: the least recently used idle jails
// are stopped first. When every other jail is busy, the call is refused.
// The count is taken before jails start, so a burst of first commands can
// overshoot briefly; the next call corrects it.
func (m *Manager) makeRoom(id string) error {
	limit := m.cfg.MaxRunningShells
	if limit <= 0 {
		return nil
	}
	m.mu.Lock()
	type cand struct {
		l    *live
		used time.Time
	}
	var idle []cand
	running := 0
	for other, l := range m.live {
		if other == id || !l.sh.Running() {
			continue
		}
		running++
		if !l.sh.Busy() {
			idle = append(idle, cand{l, l.lastUsed})
		}
	}
	m.mu.Unlock()
	if running < limit {
		return nil
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].used.Before(idle[j].used) })
	for _, c := range idle {
		if running < limit {
			break
		}
		var s *Session
		m.mu.Lock()
		for sid, l := range m.live {
			if l == c.l {
				s = m.known[sid]
			}
		}
		m.mu.Unlock()
		m.stopIdle(s, c.l)
		running--
	}
	if running >= limit {
		return limitf("this server already runs its maximum of %d shells and all of them are busy: retry in a moment, "+
			"or pause sessions you are not using", limit)
	}
	return nil
}

// RunningShells returns how many jails run now.
func (m *Manager) RunningShells() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, l := range m.live {
		if l.sh.Running() {
			n++
		}
	}
	return n
}
