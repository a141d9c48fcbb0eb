package sessions

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// The disk quota bounds what a session's workspace and home use together
// (a bound directory is the user's own and only its home counts). It is
// enforced while commands run, not only checked before them:
//
//   - RLIMIT_FSIZE, which the kernel applies and the jail cannot raise,
//     caps every file at the quota; over the quota it is 0, so no command
//     can write data into a regular file, whatever it is called.
//   - A watcher (watch.go) measures the usage while the jail has processes
//     and stops all of them when it crosses the limit: the quota, or, for a
//     command started over the quota, the usage when it started. Freeing
//     space never crosses it, so rm (or anything that only deletes) works.
//   - After every command the usage is measured again, so that its result
//     says when the quota was crossed, and the next command starts from a
//     true figure.
//   - The file tools refuse a write that would cross the quota before
//     writing (CheckWrite).

// quotas holds each session's disk measurement and limit.
type quotas struct {
	// mu protects m.
	mu sync.Mutex
	m  map[string]*usage
}

// usage is one session's quota state. mu serialises measurements (one
// walk at a time) and protects the fields.
type usage struct {
	mu     sync.Mutex
	bytes  int64     // the last figure: walked, or estimated since (measure.go)
	walked int64     // the last walk's figure
	fsAt   int64     // the file systems' used bytes when it started
	fs     []fsRef   // the file systems counted (measure.go)
	err    error     // why the walked figure is only a lower bound
	at     time.Time // when the last walk ran
	walk   time.Duration
	// limit is the usage the session's processes may reach: the quota, or
	// the usage at the start of a command that started over it.
	limit int64
	// restricted: the current command started over the quota (or with a
	// usage that could not be measured) and cannot write files.
	restricted bool
	// stopped: the watcher stopped the jail and left a note saying so; the
	// end of the command does not report the crossing a second time.
	stopped bool
	// watching: a watcher goroutine runs; opened is when the last command
	// was let through, so that it does not exit just before the command
	// starts.
	watching bool
	opened   time.Time
	// near: the session was told it uses most of its quota; cleared when
	// usage falls back, so the next approach is told again. notice is what
	// a client should be told and has not been yet (TakeQuotaNotice).
	near   bool
	notice string
	// written is what CheckWrite let the file tools add since the last
	// walk (see estimateLocked).
	written int64
}

// nearQuota is the share of the quota past which a session is warned.
const nearQuota = 0.9

func (q *quotas) get(id string) *usage {
	q.mu.Lock()
	defer q.mu.Unlock()
	u := q.m[id]
	if u == nil {
		u = &usage{}
		q.m[id] = u
	}
	return u
}

func (q *quotas) forget(id string) {
	q.mu.Lock()
	delete(q.m, id)
	q.mu.Unlock()
}

// Usage returns the disk use of s's workspace and home, as the quota
// counts it.
func (m *Manager) Usage(s *Session) (int64, error) {
	u := m.quota.get(s.ID)
	u.mu.Lock()
	defer u.mu.Unlock()
	m.walkLocked(s, u, true)
	return u.bytes, u.err
}

// checkQuota refuses `what` when s is over Config.QuotaBytes.
func (m *Manager) checkQuota(s *Session, what string) error {
	return m.CheckWrite(s, 0, what)
}

// CheckWrite refuses `what` (e.g. "write notes.md") when it would take s's
// workspace and home over Config.QuotaBytes; grow is how many bytes it
// adds (a file's new size minus the size of the file it replaces).
func (m *Manager) CheckWrite(s *Session, grow int64, what string) error {
	q := m.cfg.QuotaBytes
	if q <= 0 {
		return nil
	}
	u := m.quota.get(s.ID)
	u.mu.Lock()
	defer u.mu.Unlock()
	if grow < 0 {
		grow = 0
	}
	m.measureLocked(s, u, q-grow, false, true)
	n, err := u.bytes, u.err
	if err != nil {
		return limitf("cannot %s in session %s: its disk use cannot be measured (%v); delete what the error names, "+
			"e.g. with shell_exec 'rm -rf DIR'", what, s.ID, err)
	}
	switch {
	case n > q:
		return limitf("cannot %s in session %s: its workspace and home use %s, over its quota of %s; delete files first "+
			"(commands still run, and rm works, e.g. shell_exec 'rm -rf build'), or delete the session",
			what, s.ID, FormatBytes(n), FormatBytes(q))
	case n+grow > q:
		return limitf("cannot %s in session %s: it adds %s to the %s its workspace and home use, over its quota of %s; "+
			"delete files first (e.g. shell_exec 'rm -rf build'), or write less",
			what, s.ID, FormatBytes(grow), FormatBytes(n), FormatBytes(q))
	}
	u.written += grow
	return nil
}

// startCommand sets the quota up for a command about to run in s: the
// limit the watcher enforces, the file-size cap the kernel enforces, and
// a running watcher.
func (m *Manager) startCommand(s *Session, sh Runner) error {
	q := m.cfg.QuotaBytes
	if q <= 0 {
		return nil
	}
	u := m.quota.get(s.ID)
	u.mu.Lock()
	if u.limit == 0 {
		u.limit = q
	}
	m.measureLocked(s, u, q, false, u.at.IsZero()) // no jail start just to measure: the estimate stands
	n, err := u.bytes, u.err
	if crossed(u) && !u.stopped && sh.Background() {
		// Background jobs took it past the limit since the watcher last
		// looked: stop them as it would have.
		m.stopLocked(s, sh, u)
	}
	u.restricted = err != nil || n > q
	u.limit = q
	if u.restricted {
		u.limit = max(n, q)
	}
	u.stopped = false
	u.opened = m.now()
	if !u.watching {
		u.watching = true
		go m.watch(s, sh, u)
	}
	restricted := u.restricted
	u.mu.Unlock()
	if s.Mode == ModeBind {
		return nil // the bound directory is not counted: its files are not capped
	}
	fsize := int64(-1) // the profile's, which Shell sets to at most the quota
	if restricted {
		fsize = 0
	}
	sh.LimitFileSize(fsize)
	return nil
}

// afterCommand runs in the shell after every command (sandbox
// Options.AfterCommand): it measures the usage and returns what the
// command's result must say about the quota. A command that crossed the
// limit has its background jobs stopped too.
func (m *Manager) afterCommand(s *Session, sh Runner) string {
	q := m.cfg.QuotaBytes
	u := m.quota.get(s.ID)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.limit == 0 { // no command was let through by Open (the CLI's own shell)
		u.limit = q
	}
	// Restricted, a walk tells whether rm got it back under the quota.
	m.measureLocked(s, u, u.limit, u.restricted || m.walkAfter(u), false)
	n := u.bytes
	if u.stopped { // the watcher's note already says it
		u.stopped = false
		return ""
	}
	if crossed(u) {
		note := "warren: this command took session " + s.ID + " over its disk quota: " + m.usageText(s, u)
		u.notice, u.near = note, true
		// Only here is it worth a walk of the jail's processes in /proc.
		if sh.Background() {
			sh.StopAll("")
			note += " Its background jobs were stopped (the shell restarts with the same cwd and exports)."
		}
		return note + " " + overAdvice
	}
	switch {
	case !u.restricted && n <= q && float64(n) >= nearQuota*float64(q) && !u.near:
		u.near = true
		u.notice = fmt.Sprintf("warren: session %s uses %s of its %s disk quota (%d%%): delete what it no longer needs "+
			"before commands are stopped at the quota.", s.ID, FormatBytes(n), FormatBytes(q), n*100/q)
		return u.notice
	case float64(n) < nearQuota*float64(q):
		u.near = false
	}
	switch {
	case u.restricted && n > q:
		return "warren: session " + s.ID + " is over its disk quota: " + m.usageText(s, u) + " " + overAdvice
	case u.restricted:
		return fmt.Sprintf("warren: session %s is back under its disk quota (%s of %s): the next command can write files again.",
			s.ID, FormatBytes(n), FormatBytes(q))
	}
	return ""
}

// A command that ran long enough is measured by a walk when it ends, not by
// the estimate: the file system's growth is only the session's own when
// nothing else on it frees space meanwhile, and on a shared disk something
// does (a session writing 4.8 of its 5 MiB while another process freed
// 8 MiB showed no growth, and was not told its quota was nearly full).
// The walk costs at most 1/walkRare of the command's time, and commands
// shorter than walkMin (echo, cd, most of an agent's calls) keep the
// estimate; the watcher and the periodic walk bound what they can hide.
const walkMin = time.Millisecond

// walkAfter reports whether the command that just ended (let through at
// u.opened) ran long enough to be measured by a walk.
func (m *Manager) walkAfter(u *usage) bool {
	d := m.now().Sub(u.opened)
	return d >= walkMin && d >= walkRare*u.walk
}

// crossed reports whether the last measurement is past the limit: usage
// grew past it, or could not be measured in a command that was not
// restricted already.
func crossed(u *usage) bool {
	return u.bytes > u.limit || u.err != nil && !u.restricted
}

// overAdvice says what to do over the quota.
const overAdvice = "Delete files to get back under it (rm works, e.g. 'rm -rf build'); " +
	"until then commands run but cannot write files."

// usageText says how much s uses against its quota, and why the figure is
// a lower bound when it is one.
func (m *Manager) usageText(s *Session, u *usage) string {
	n, q := sizes(u.bytes, m.cfg.QuotaBytes)
	t := fmt.Sprintf("its workspace and home use %s, over its quota of %s.", n, q)
	if u.bytes <= m.cfg.QuotaBytes {
		t = fmt.Sprintf("its workspace and home use at least %s of its quota of %s.", n, q)
	}
	if u.err != nil {
		t += " Its disk use cannot be measured in full: " + u.err.Error() + "; delete that tree."
	}
	if u.restricted && u.bytes > u.limit && u.err == nil {
		t += fmt.Sprintf(" It was over the quota already and grew from %s.", FormatBytes(u.limit))
	}
	return t
}

// sizes formats a usage and a quota, in bytes when rounding would make
// them look equal ("5.0 MiB, over its quota of 5.0 MiB").
func sizes(n, q int64) (string, string) {
	a, b := FormatBytes(n), FormatBytes(q)
	if a == b && n != q {
		return fmt.Sprintf("%d bytes", n), fmt.Sprintf("%s (%d bytes)", b, q)
	}
	return a, b
}

// FormatBytes renders n with a binary unit: 512 B, 1.5 MiB, 2.0 GiB.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// ParseBytes reads a size such as 500M, 10GiB, 1.5G or 1048576 (bytes).
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(s), "B"), "I"))
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	var f float64
	if _, err := fmt.Sscanf(t, "%g", &f); err != nil || f < 0 {
		return 0, fmt.Errorf("size %q: want a number with an optional unit, e.g. 500M or 10G", s)
	}
	return int64(f * float64(mult)), nil
}

// TakeQuotaNotice returns, once, what a client working in session id
// should be told about its disk quota (nearly full, crossed), or "".
func (m *Manager) TakeQuotaNotice(id string) string {
	m.quota.mu.Lock()
	u := m.quota.m[id]
	m.quota.mu.Unlock()
	if u == nil {
		return ""
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	n := u.notice
	u.notice = ""
	return n
}

// DiskUse returns what s's workspace and home used at the last walk,
// walking again when that is older than Config.QuotaInterval: a figure for
// listings, which must not walk every workspace on every call.
func (m *Manager) DiskUse(s *Session) (int64, error) {
	u := m.quota.get(s.ID)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.at.IsZero() || m.now().Sub(u.at) >= m.cfg.QuotaInterval {
		m.walkLocked(s, u, false) // a listing starts no jail
	}
	return u.walked, u.err
}
