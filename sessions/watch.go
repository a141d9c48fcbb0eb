package sessions

import (
	"time"
)

// Defaults of the quota watcher.
const (
	// defaultQuotaPoll is how often the watcher estimates a session's disk
	// use (one statfs) while its jail has processes. What a session can
	// write past its quota is about what it writes in one interval plus
	// one walk; RLIMIT_FSIZE already caps every single file at the quota.
	defaultQuotaPoll = 50 * time.Millisecond
	// watchLinger is how long a watcher waits with nothing running before
	// it exits; Open starts a new one for the next command.
	watchLinger = 2 * time.Second
	// walkShare bounds the time spent walking a big tree whose estimate
	// is past the limit: a walk starts at least walkShare times as long as
	// the last one took after it, so at most a fifth of a core goes to it.
	walkShare = 4
	// periodicWalk is how often a walk checks the estimate while processes
	// run (at least walkRare walks' time apart): space freed elsewhere on
	// the file system can hide growth from it.
	periodicWalk = 250 * time.Millisecond
	// walkRare bounds walks the estimate did not ask for to a twentieth of
	// the time they cover (since the last walk, or the command's run),
	// taking the last walk's duration as what the next one costs.
	walkRare = 20
)

// watch polls s's disk use while the jail has processes (a command, or
// background jobs after it) and stops every one of them when the usage
// crosses its limit. It exits when nothing has run for watchLinger, or
// when the session's shell is closed or replaced.
func (m *Manager) watch(s *Session, sh Runner, u *usage) {
	var idle time.Time
	for {
		time.Sleep(m.cfg.QuotaPoll)
		m.mu.Lock()
		l := m.live[s.ID]
		m.mu.Unlock()
		if l == nil || l.sh != sh {
			m.stopWatching(u)
			return
		}
		if !sh.Busy() && !sh.Background() {
			if idle.IsZero() {
				idle = m.now()
			}
			if m.now().Sub(idle) >= watchLinger && m.stopWatching(u, idle) {
				return
			}
			continue
		}
		idle = time.Time{}
		m.enforce(s, sh, u)
	}
}

// stopWatching marks u unwatched, unless a command was let through since
// idleSince: then the watcher must go on.
func (m *Manager) stopWatching(u *usage, idleSince ...time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(idleSince) > 0 && !u.opened.Before(idleSince[0]) {
		return false
	}
	u.watching = false
	return true
}

// enforce estimates s's usage and, when the estimate is past the limit
// (or a periodic check is due), walks; past the limit by the walk, it stops
// every process in the jail with a note for the result that reports it.
func (m *Manager) enforce(s *Session, sh Runner, u *usage) {
	u.mu.Lock()
	defer u.mu.Unlock()
	m.estimateLocked(s, u, false)
	since := m.now().Sub(u.at)
	if u.bytes > u.limit && since >= walkShare*u.walk || since >= max(periodicWalk, walkRare*u.walk) {
		m.walkLocked(s, u, false)
		if crossed(u) && !u.stopped {
			m.stopLocked(s, sh, u)
		}
	}
}

// stopLocked stops every process in s's jail, leaving a note for the
// result that reports it. Called with u.mu held.
func (m *Manager) stopLocked(s *Session, sh Runner, u *usage) {
	note := "warren: stopped every process of session " + s.ID + " (the running command and background jobs): " +
		m.usageText(s, u) + " The shell restarts with the same cwd and exports. " + overAdvice
	if sh.StopAll(note) {
		u.stopped = true
	}
}
