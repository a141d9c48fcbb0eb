package sessions

import (
	"slices"
	"sync"
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
func (m *Manager) quotaDirs(s *Session) []fsRef {
	var dirs []fsRef
	if s.Mode != ModeBind {
		dirs = append(dirs, fsRef{dir: s.Workspace, fd: -1})
	}
	if m.cfg.DataDir != "" {
		dirs = append(dirs, fsRef{dir: m.homeDir(s.ID), fd: -1})
	}
	return dirs
}

// fsRef names a file system the quota counts: by a descriptor the manager
// holds for it (fsHandles), or, without one, by a directory on it.
type fsRef struct {
	dir string
	fd  int // -1: statfs dir
}

// fsUsed returns the bytes used on the file systems refs name, each
// counted once, and refs without those that share a file system with one
// before them, each with the file system's descriptor: what the estimates
// until the next walk need. A directory that cannot be measured (a home
// not made yet) stays in the list, to be counted once it exists.
func (m *Manager) fsUsed(refs []fsRef) (int64, []fsRef) {
	var total int64
	var seen [][2]int32
	kept := refs[:0:0]
	for _, r := range refs {
		var st unix.Statfs_t
		var err error
		if r.fd >= 0 {
			err = unix.Fstatfs(r.fd, &st)
		} else {
			err = unix.Statfs(r.dir, &st)
		}
		if err != nil {
			kept = append(kept, fsRef{dir: r.dir, fd: -1})
			continue
		}
		if slices.Contains(seen, st.Fsid.Val) {
			continue
		}
		seen = append(seen, st.Fsid.Val)
		if r.fd < 0 {
			r.fd = m.fsHandles.get(st.Fsid.Val, r.dir)
		}
		kept = append(kept, r)
		total += int64(st.Blocks-st.Bfree) * st.Bsize
	}
	return total, kept
}

// fsHandles holds one descriptor (O_PATH) per file system the quotas
// count, opened on the first directory of it that a walk found. The
// estimates between walks (twice per command, and every poll of the
// watcher) fstatfs it instead of statfs'ing a path, which costs a lookup of
// every directory on the way each time. Walks still find each session's
// file systems by path, so a directory moved to another file system is
// counted there from its next walk. A held descriptor keeps its file
// system busy (a plain umount refuses) until the manager closes.
type fsHandles struct {
	mu  sync.Mutex
	fds map[[2]int32]int
}

// get returns the descriptor of file system id, opening dir for it when
// there is none yet; -1 when dir cannot be opened or lies elsewhere now.
func (h *fsHandles) get(id [2]int32, dir string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if fd, ok := h.fds[id]; ok {
		return fd
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) != nil || st.Fsid.Val != id {
		unix.Close(fd) // moved to another file system since its statfs
		return -1
	}
	if h.fds == nil {
		h.fds = map[[2]int32]int{}
	}
	h.fds[id] = fd
	return fd
}

// close closes every descriptor.
func (h *fsHandles) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, fd := range h.fds {
		unix.Close(fd)
		delete(h.fds, id)
	}
}

// walkLocked measures s's workspace (unless bound) and home: the runner
// inside the jail walks them (runnerUsage), starting the jail if start
// allows. With an error the figure is a lower bound. Without a runner to
// ask (a command killed it, or start is false and no jail runs), the
// figure stays what it was: the estimate (the walked figure plus the file
// system's growth, which statfs measures on this side and nothing in the
// jail can hide) goes on deciding.
func (m *Manager) walkLocked(s *Session, u *usage, start bool) {
	// Before: what is written during the walk counts again, never less.
	// The file systems are found again at every walk (a mount may change).
	fsBefore, refs := m.fsUsed(m.quotaDirs(s))
	begin := time.Now()
	n, measured, err := m.runnerUsage(s, start)
	if !measured {
		if u.at.IsZero() {
			u.err = err
		}
		return
	}
	u.walked, u.fsAt, u.fs, u.err, u.written = n, fsBefore, refs, err, 0
	u.bytes, u.at, u.walk = n, m.now(), time.Since(begin)
}

// estimateLocked sets u.bytes to the walked usage plus the file system's
// growth since the walk, walking first when there was none yet. What the
// file tools let through since the walk is added too: other processes
// freeing space on a busy file system would otherwise hide it, and a
// second write could pass a quota the first one already filled. Counting
// a write twice only overestimates, and a walk settles any estimate near
// the limit.
func (m *Manager) estimateLocked(s *Session, u *usage, start bool) {
	if u.at.IsZero() {
		m.walkLocked(s, u, start)
		return
	}
	used, _ := m.fsUsed(u.fs)
	u.bytes = u.walked + max(u.written, used-u.fsAt)
}

// measureLocked estimates s's usage and walks when the estimate is past
// limit, or when force is set, or when the last walk is older than
// Config.QuotaInterval. It reports whether it walked. start says whether
// it may start the jail to walk (not inside a command's turn).
func (m *Manager) measureLocked(s *Session, u *usage, limit int64, force, start bool) bool {
	m.estimateLocked(s, u, start)
	if force || u.bytes > limit || m.now().Sub(u.at) >= m.cfg.QuotaInterval {
		m.walkLocked(s, u, start)
		return true
	}
	return false
}
