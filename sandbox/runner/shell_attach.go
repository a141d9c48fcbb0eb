package runner

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// A local jail's runner starts its shell on pipes the server made
// (proto.OpShellAttach): the runner stays the shell's parent and owns its
// life, and a command's bytes go between the server and the shell without
// a hop through the runner (docs/runner-protocol.md, "Where a command's
// bytes go").

func init() {
	register(proto.OpShellAttach, func(c *Call) (any, error) { return c.srv.shellState().attach(c) })
}

// shellPipes are the jail's ends of the attached shell's pipes: its stdin
// (read end), the status pipe, stdout and stderr (write ends). Taken once.
var shellPipes struct {
	mu    sync.Mutex
	files []*os.File
}

// UseShellPipes names the descriptors of the pipes the server made for
// the shell (--shell-fds): stdin's read end, then the write ends of the
// status pipe, stdout and stderr.
func UseShellPipes(fds [4]int) {
	shellPipes.mu.Lock()
	defer shellPipes.mu.Unlock()
	shellPipes.files = nil
	for _, fd := range fds {
		unix.CloseOnExec(fd)
		shellPipes.files = append(shellPipes.files, os.NewFile(uintptr(fd), "shell-pipe"))
	}
}

func takeShellPipes() []*os.File {
	shellPipes.mu.Lock()
	defer shellPipes.mu.Unlock()
	f := shellPipes.files
	shellPipes.files = nil
	return f
}

func (s *shellState) attach(c *Call) (any, error) {
	var a proto.ShellAttachArgs
	if err := c.DecodeArgs(&a); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil || s.ended {
		return nil, proto.Errorf(proto.CodeBusy, "the shell has been started already")
	}
	files := takeShellPipes()
	if len(files) != 4 {
		return nil, proto.Errorf(proto.CodeUnavailable, "this runner was started without the shell's pipes (--shell-fds)")
	}
	p, err := spawnShell(files[0], files[1], files[2], files[3], a.NProc)
	for _, f := range files {
		f.Close() // the shell holds them now; nothing else in the jail does
	}
	if err != nil {
		s.ended = true
		return nil, err
	}
	s.p, s.attached = p, true
	go s.watch(p)
	return proto.ShellAttachResult{PID: p.pid}, nil
}

// spawnShell starts /bin/sh on the given pipe ends (as startShell does,
// without reading any of them) and sets its process limit before it can
// read its first line.
func spawnShell(inR, stW, outW, errW *os.File, nproc uint64) (*shellProc, error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, proto.Errorf(proto.CodeInternal, "start the shell: %v", err)
	}
	defer null.Close()
	proc, err := os.StartProcess("/bin/sh", []string{"/bin/sh"}, &os.ProcAttr{
		Files: []*os.File{inR, stW, errW, nil, nil, nil, null, outW, errW}, // 3-5 closed
	})
	if err != nil {
		return nil, proto.Errorf(proto.CodeInternal, "start the shell: %v", err)
	}
	p := &shellProc{kill9: func() { _ = proc.Kill() }, pid: proc.Pid, exited: make(chan struct{})}
	go func() {
		ps, _ := proc.Wait()
		p.exitCode = exitStatus(ps)
		close(p.exited)
	}()
	if err := limitProcs(p.pid, nproc); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

// ShellExit reports the exit status of the connection's shell once it
// has ended: a jail's runner exits with it, so that the server, which
// reaps the jail, learns the status of a shell it did not start.
func (s *Server) ShellExit() (int, bool) {
	s.mu.Lock()
	sh := s.shell
	s.mu.Unlock()
	if sh == nil {
		return 0, false
	}
	sh.mu.Lock()
	p := sh.p
	sh.mu.Unlock()
	if p == nil {
		return 0, false
	}
	select {
	case <-p.exited:
		return p.exitCode, true
	default:
		return 0, false
	}
}
