package sessions

import (
	"errors"
	"io/fs"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// Measuring a session's disk use means walking its tree, which takes
// about a second for 70,000 files: too slow to do after every command, let
// alone several times a second while one runs. Between walks the usage is
// estimated from the file system: the walked figure plus however much the
// whole file system's used space grew since (statfs, one system call,
// which counts data as soon as it is written, before it reaches the disk).
// The estimate is never lower than the truth, except when something else
// frees space on the same file system at the same time; a periodic walk
// bounds that. Only when the estimate crosses a limit does a walk decide.

// quotaDirs are the directories whose file systems hold what s's quota
// counts: its workspace (unless bound) and its home.
func (m *Manager) quotaDirs(s *Session) []string {
	var dirs []string
	if s.Mode != ModeBind {
		dirs = append(dirs, s.Workspace)
	}
	if m.cfg.DataDir != "" {
		dirs = append(dirs, m.homeDir(s.ID))
	}
	return dirs
}

// fsUsed returns the bytes used on the file systems that hold dirs, each
// counted once, and dirs without those that share a file system with one
// before them: what the estimates until the next walk need to statfs. A
// directory that cannot be measured (a home not made yet) stays in the
// list, to be counted once it exists.
func fsUsed(dirs []string) (int64, []string) {
	var total int64
	var seen [][2]int32
	kept := dirs[:0:0]
	for _, d := range dirs {
		var st unix.Statfs_t
		if unix.Statfs(d, &st) != nil {
			kept = append(kept, d)
			continue
		}
		if slices.Contains(seen, st.Fsid.Val) {
			continue
		}
		seen = append(seen, st.Fsid.Val)
		kept = append(kept, d)
		total += int64(st.Blocks-st.Bfree) * st.Bsize
	}
	return total, kept
}

// walkLocked measures s's workspace (unless bound) and home by walking
// them. With an error the figure is a lower bound.
func (m *Manager) walkLocked(s *Session, u *usage) {
	// Before: what is written during the walk counts again, never less.
	// The file systems are found again at every walk (a mount may change).
	fsBefore, dirs := fsUsed(m.quotaDirs(s))
	start := time.Now()
	var n int64
	var errs []error
	if s.Mode != ModeBind { // a bound directory is the user's, not the session's
		w, err := DiskUsage(s.Workspace)
		n += w
		errs = append(errs, err)
	}
	if m.cfg.DataDir != "" {
		h, err := DiskUsage(m.homeDir(s.ID))
		n += h
		if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	u.walked, u.fsAt, u.fsDirs, u.err, u.written = n, fsBefore, dirs, errors.Join(errs...), 0
	u.bytes, u.at, u.walk = n, m.now(), time.Since(start)
}

// estimateLocked sets u.bytes to the walked usage plus the file system's
// growth since the walk, walking first when there was none yet. What the
// file tools let through since the walk is added too: other processes
// freeing space on a busy file system would otherwise hide it, and a
// second write could pass a quota the first one already filled. Counting
// a write twice only overestimates, and a walk settles any estimate near
// the limit.
func (m *Manager) estimateLocked(s *Session, u *usage) {
	if u.at.IsZero() {
		m.walkLocked(s, u)
		return
	}
	used, _ := fsUsed(u.fsDirs)
	u.bytes = u.walked + max(u.written, used-u.fsAt)
}

// measureLocked estimates s's usage and walks when the estimate is past
// limit, or when force is set, or when the last walk is older than
// Config.QuotaInterval. It reports whether it walked.
func (m *Manager) measureLocked(s *Session, u *usage, limit int64, force bool) bool {
	m.estimateLocked(s, u)
	if force || u.bytes > limit || m.now().Sub(u.at) >= m.cfg.QuotaInterval {
		m.walkLocked(s, u)
		return true
	}
	return false
}
