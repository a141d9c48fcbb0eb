package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

var errNoRunner = errors.New("start jail: the jail started without its runner")

// statusCap bounds the exports the server takes from the runner (see
// proto.StatusCap).
const statusCap = proto.StatusCap

// recordReader splits the runner's output stream (proto.OpShellExec) into
// its records as the frames come, whatever their boundaries: stdout and
// stderr go to the command's capped buffers and OnOutput without a copy,
// the exports are kept (bounded) for the state. Anything else breaks the
// protocol.
type recordReader struct {
	c    *ended
	hdr  [proto.RecHeader]byte
	nh   int // header bytes held
	tag  byte
	left int // bytes of the current record still to come
}

// feed takes b; false when the runner broke the protocol.
func (r *recordReader) feed(b []byte) bool {
	for len(b) > 0 {
		if r.nh < proto.RecHeader {
			n := copy(r.hdr[r.nh:], b)
			r.nh += n
			b = b[n:]
			if r.nh < proto.RecHeader {
				return true
			}
			r.tag, r.left = r.hdr[0], int(binary.BigEndian.Uint32(r.hdr[1:]))
			switch r.tag {
			case proto.RecStdout, proto.RecStderr:
			case proto.RecExports:
				if r.c.gotExp || r.left > proto.StatusCap {
					return false
				}
				r.c.exports = make([]byte, 0, r.left)
			default:
				return false
			}
			if r.left == 0 {
				r.done()
			}
			continue
		}
		n := min(len(b), r.left)
		r.take(b[:n])
		b, r.left = b[n:], r.left-n
		if r.left == 0 {
			r.done()
		}
	}
	return true
}

func (r *recordReader) take(p []byte) {
	if r.tag == proto.RecExports {
		r.c.exports = append(r.c.exports, p...)
		return
	}
	stream := Stream(r.tag) // RecStdout and RecStderr are Stdout and Stderr
	r.c.out[stream-1].Write(p)
	if cb := r.c.opts.OnOutput; cb != nil {
		cb(stream, p)
	}
}

func (r *recordReader) done() {
	if r.tag == proto.RecExports {
		r.c.gotExp = true
	}
	r.nh = 0
}

// whole reports whether the stream ended between records.
func (r *recordReader) whole() bool { return r.nh == 0 }

// complete finishes a command that has ended (res, and the runner's reply
// when there is one): it adds the notes, takes the shell's state, starts a
// fresh jail when the shell ended, and hands the shell's turn on.
func (s *Shell) complete(c *ended, res Result, rep *proto.ShellExecResult) Result {
	defer s.release()
	j := c.j
	res.Duration = now().Sub(c.start)
	ended := rep == nil || rep.ShellEnded
	if rep != nil && !rep.ShellEnded && rep.Cwd != "" {
		j.shellUp = true // the shell ran the command and reported
	}
	res.ShellRestarted = res.ShellRestarted || c.died
	// A command that hit the jail's process limit shows it (a refused fork
	// is an error on stderr, or a failed status) or started jobs: its
	// leftovers are looked for now, so that its own result says so. Any
	// other command's are looked for before the next one: one read of
	// pids.events per command instead of two.
	if !ended && (res.ExitCode != 0 || c.out[1].total > 0 || mayStartJobs(c.text)) {
		s.stopLeftoversAtLimit(j)
	}
	if rep == nil && j.remote {
		s.mu.Lock()
		s.notes = append(s.notes, "warren: the connection to the session's runner was lost (was its pod restarted?); "+
			"the next command starts a fresh shell with the saved cwd and exports")
		s.mu.Unlock()
	}
	s.finish(c)
	res.Stdout, res.StdoutBytes = c.out[0].bytes(), c.out[0].total
	res.Stderr, res.StderrBytes = c.out[1].bytes(), c.out[1].total
	res.Truncated = c.out[0].truncated() || c.out[1].truncated()

	s.mu.Lock()
	if rep != nil && !rep.ShellEnded {
		s.takeState(c, rep)
	}
	res.Cwd = s.state.Cwd
	if res.Cwd == "" {
		res.Cwd = MountPoint
	}
	s.mu.Unlock()

	if ended {
		j.kill()
		// A runner on the network is dialled again by the next command:
		// one that is down (its pod restarting) must not hold this result.
		if !j.remote {
			if _, err := s.ensureJail(); err != nil {
				res.ShellRestarted = false // the next Exec reports why
			}
		}
	}
	return res
}

// takeState keeps the directory and exports the runner reported, checked
// first: the runner is the jail's, and nothing the jail says is trusted
// beyond its bounds. Called with s.mu held.
func (s *Shell) takeState(c *ended, rep *proto.ShellExecResult) {
	if cwd := rep.Cwd; validCwd(cwd) && s.state.Cwd != cwd {
		s.state.Cwd = cwd
		s.stateVersion++
	}
	if !c.gotExp {
		return // unchanged, or claimed changed and not sent: asked again next time
	}
	c.j.exports = rep.Exports
	// Most commands export nothing: parse only what changed. State hands
	// out copies, so the map is never written once set.
	if !s.parsed || !bytes.Equal(c.exports, s.exports) {
		s.state.Env = parseExports(string(c.exports))
		s.exports, s.parsed = c.exports, true
		s.stateVersion++
	}
}

// validCwd reports whether a directory the runner reported can be the
// shell's: an absolute path of at most PATH_MAX bytes without NUL.
func validCwd(cwd string) bool {
	return strings.HasPrefix(cwd, "/") && len(cwd) <= proto.MaxCwd && strings.IndexByte(cwd, 0) < 0
}
