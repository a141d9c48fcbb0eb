package sessions

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// quotas caches workspace disk measurements: a walk of a big tree takes
// seconds, so one measurement serves every call for Config.QuotaInterval.
type quotas struct {
	// mu protects m.
	mu sync.Mutex
	m  map[string]*usage
}

type usage struct {
	mu    sync.Mutex // one walk at a time per session
	bytes int64
	at    time.Time
	over  bool
}

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

// afterCommand makes the next check re-measure a workspace that was over
// its quota, so that freeing space takes effect at once.
func (q *quotas) afterCommand(id string) {
	q.mu.Lock()
	u := q.m[id]
	q.mu.Unlock()
	if u == nil {
		return
	}
	u.mu.Lock()
	if u.over {
		u.at = time.Time{}
	}
	u.mu.Unlock()
}

// Usage returns the measured disk use of s's workspace, measuring it when
// the last measurement is older than Config.QuotaInterval.
func (m *Manager) Usage(s *Session) (int64, error) {
	u := m.quota.get(s.ID)
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.at.IsZero() && m.now().Sub(u.at) < m.cfg.QuotaInterval {
		return u.bytes, nil
	}
	var n int64
	if s.Mode != ModeBind { // a bound directory is the user's, not the session's
		w, err := DiskUsage(s.Workspace)
		if err != nil {
			return 0, err
		}
		n += w
	}
	if m.cfg.DataDir != "" {
		h, err := DiskUsage(m.homeDir(s.ID))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
		n += h
	}
	u.bytes, u.at = n, m.now()
	u.over = m.cfg.QuotaBytes > 0 && n > m.cfg.QuotaBytes
	return n, nil
}

// checkQuota refuses `what` when s's workspace and home together are over
// Config.QuotaBytes. Bound directories belong to the user and are not
// measured; the home of a bound session is.
func (m *Manager) checkQuota(s *Session, what string) error {
	if m.cfg.QuotaBytes <= 0 {
		return nil
	}
	n, err := m.Usage(s)
	if err != nil {
		return fmt.Errorf("measure workspace of session %s: %w", s.ID, err)
	}
	if n <= m.cfg.QuotaBytes {
		return nil
	}
	return limitf("cannot %s in session %s: its workspace uses %s, over its quota of %s; free space first "+
		"(a command that is only rm, rmdir or git clean still runs, e.g. 'rm -rf build'), or delete the session",
		what, s.ID, FormatBytes(n), FormatBytes(m.cfg.QuotaBytes))
}

// freesSpace reports whether command only removes files, which is allowed
// over quota. Anything with redirections, pipes, lists or substitutions is
// not: 'rm x; dd ...' must not slip through.
func freesSpace(command string) bool {
	c := strings.TrimSpace(command)
	if c == "" || strings.ContainsAny(c, ";&|<>`$()\n") {
		return false
	}
	for _, p := range []string{"rm ", "rmdir ", "git clean "} {
		if strings.HasPrefix(c, p) {
			return true
		}
	}
	return false
}

// DiskUsage walks dir like du: the blocks allocated to every file and
// directory, without following symbolic links; hard links count once.
func DiskUsage(dir string) (int64, error) {
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // vanished or unreadable: skip, as du does with a warning
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			total += fi.Size()
			return nil
		}
		if st.Nlink > 1 && !d.IsDir() {
			k := inode{uint64(st.Dev), st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total, err
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
