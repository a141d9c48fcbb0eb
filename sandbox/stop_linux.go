package sandbox

import (
	"context"
	"time"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// This file holds what a supervisor outside the package (the session
// manager's disk-quota watcher) needs to bound a jail while it runs: know
// whether anything runs in it, stop everything in it, cap the size of the
// files it may write, and add a line to the result that reports it.

// fileSizeLimit is the RLIMIT_FSIZE asked for with LimitFileSize; the
// zero value means "the profile's".
type fileSizeLimit struct {
	set   bool
	bytes int64
	// stale: the running jail's shell does not have it yet (prlimit was
	// refused); the next command restarts the jail with it.
	stale bool
}

// Background reports whether processes other than the shell itself are
// alive in the jail: the running command's, or background jobs and
// daemons that earlier commands left.
func (s *Shell) Background() bool {
	s.mu.Lock()
	j := s.jail
	s.mu.Unlock()
	if j == nil || !j.alive() {
		return false
	}
	return len(j.others()) > 0
}

// StopAll kills every process in the jail at once (the running command,
// background jobs and the shell) and keeps the Shell usable, as after a
// timeout that had to kill the jail: the running command ends with
// ShellRestarted, or the next one starts a fresh jail with the saved cwd
// and exports. A non-empty note is added to the stderr of the result that
// reports the stop (the running command's, or else the next one's). It
// reports whether a jail was running.
func (s *Shell) StopAll(note string) bool {
	s.mu.Lock()
	j := s.jail
	running := j != nil && j.alive()
	if running && note != "" {
		s.notes = append(s.notes, note)
	}
	s.mu.Unlock()
	if !running {
		return false
	}
	// Killing the pid namespace's init kills everything in it; whoever
	// runs the next command reaps what is left (ensureJail).
	j.stop()
	select {
	case <-j.exited:
	case <-time.After(2 * time.Second):
	}
	return true
}

// LimitFileSize caps, with RLIMIT_FSIZE (soft and hard, which the jail
// cannot raise), the size of any file that processes the shell starts from
// now on may write; 0 forbids writing data to regular files at all, and a
// negative n restores the profile's Limits.FileSizeBytes. Processes already
// running keep the limit they started with.
//
// The jail's runner sets the limit on the running shell when the kernel
// allows it (lowering it always is; raising a hard limit needs a privilege
// the jail does not have); otherwise the next command restarts the jail
// with the new limit, keeping cwd and exports, and its result says when
// that stopped background jobs.
func (s *Shell) LimitFileSize(n int64) {
	s.mu.Lock()
	want := fileSizeLimit{}
	if n >= 0 {
		want = fileSizeLimit{set: true, bytes: n}
	}
	if want.set == s.fsize.set && want.bytes == s.fsize.bytes {
		s.mu.Unlock()
		return
	}
	want.stale = s.fsize.stale
	s.fsize = want
	j := s.jail
	limit := int64(-1)
	if b, ok := s.fileSizeCap(); ok {
		limit = b
	}
	s.mu.Unlock()
	if j == nil || !j.alive() || j.runner == nil {
		return // the next jail starts with it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := j.runner.Call(ctx, proto.OpShellLimit, proto.ShellLimitArgs{FileSize: limit}, nil, nil); err != nil {
		s.mu.Lock()
		if s.jail == j {
			s.fsize.stale = true
		}
		s.mu.Unlock()
	}
}

// fileSizeCap returns the RLIMIT_FSIZE the jail's shell should have, and
// false for none. Called with s.mu held.
func (s *Shell) fileSizeCap() (int64, bool) {
	if s.fsize.set {
		return s.fsize.bytes, true
	}
	n := s.profile.Limits.FileSizeBytes
	return n, n > 0
}

// restartForFileSize kills a running jail whose shell could not be given
// the file-size limit, so that ensureJail starts one with it. Called by
// ensureJail with s.mu and the turn held.
func (s *Shell) restartForFileSize() {
	stale := s.fsize.stale
	s.fsize.stale = false
	j := s.jail
	if !stale || j == nil || !j.alive() {
		return
	}
	if len(j.others()) > 0 {
		s.notes = append(s.notes, "warren: the jail was restarted (same cwd and exports) to change its limit on "+
			"file sizes for the disk quota; that stopped its background jobs")
	}
	j.kill()
	s.jail = nil
}

// finish adds to a command's stderr what its result must say besides the
// command's own output: the AfterCommand hook's note, then notes left by
// StopAll. Called by Exec after the command ended, holding the turn.
func (s *Shell) finish(c *ended) {
	var notes []string
	if s.after != nil {
		if n := s.after(); n != "" {
			notes = append(notes, n)
		}
	}
	s.mu.Lock()
	notes = append(notes, s.notes...)
	s.notes = nil
	s.mu.Unlock()
	buf := c.out[1]
	for _, n := range notes {
		var b []byte
		if buf.total > 0 && !buf.endsWithNewline() {
			b = append(b, '\n')
		}
		b = append(b, n...)
		b = append(b, '\n')
		buf.Write(b)
		if cb := c.opts.OnOutput; cb != nil {
			cb(Stderr, b)
		}
	}
}

// endsWithNewline reports whether the last byte kept is a newline (true
// when nothing was written).
func (c *capBuffer) endsWithNewline() bool {
	if len(c.tail) > 0 {
		i := c.start - 1
		if i < 0 {
			i = len(c.tail) - 1
		}
		return c.tail[i] == '\n'
	}
	if len(c.head) > 0 {
		return c.head[len(c.head)-1] == '\n'
	}
	return true
}
