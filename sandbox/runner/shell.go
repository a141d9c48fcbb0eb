package runner

import (
	"bytes"
	"encoding/hex"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// The runner owns the jail's persistent /bin/sh: it starts it on the
// first command (with the server's init script and limits), runs one
// command at a time in it, streams the output, reads the status record,
// interrupts, times out, and reports the shell's end. The jail lives as
// long as its shell: when the shell ends, the runner reports it and
// exits, and the server starts a fresh jail with the saved state.

func init() {
	register(proto.OpShellExec, func(c *Call) (any, error) { return c.srv.shellState().exec(c) })
	register(proto.OpShellLimit, func(c *Call) (any, error) { return c.srv.shellState().limit(c) })
}

// Each connection has a shell of its own (Server.shellState), started by
// its first command. When the shell ends the runner hangs up that
// connection: in a jail the runner then exits, and the jail with it; a
// runner on a network serves the server's next connection with a fresh
// shell. When the connection ends first, the shell is killed with
// everything its commands started (end).

func newShellState(exit func()) *shellState {
	return &shellState{exit: exit, watched: make(chan struct{})}
}

// shellState is the runner's shell and what it knows of it.
type shellState struct {
	exit    func()        // hangs up the connection once its shell is gone
	watched chan struct{} // closed once watch has seen the shell's end

	mu    sync.Mutex // guards the fields below
	busy  bool       // a command runs
	p     *shellProc
	ended bool // the shell has ended: the runner is on its way out
	// attached: the shell runs on the server's pipes (shell.attach); the
	// server runs its commands, and shell.exec is refused.
	attached bool

	// Held by the command that runs (busy):
	prefix     string // random per runner, so nonces cannot be guessed
	seq        uint64
	exports    []byte // the last `export -p`
	exportsVer uint64 // counts the changes of exports
}

// shellProc is one running /bin/sh.
type shellProc struct {
	kill9  func() // SIGKILL to the shell
	pid    int
	stdin  *os.File
	status *os.File // the read end of the shell's stdout
	pipes  [2]*pipeReader
	// background holds the shell's children alive when the last command
	// ended; only the running command touches it.
	background []int
	// statusDirty: the last command did not end with a whole record, so a
	// piece of it may still be in the status pipe.
	statusDirty bool

	exited   chan struct{} // closed once the shell has been reaped
	exitCode int           // valid after exited is closed
}

// quiet is how long a timed-out or interrupted command gets to end after
// its processes were signalled, before the shell is killed.
const quiet = 500 * time.Millisecond

func (s *shellState) exec(c *Call) (any, error) {
	c.KeepOutput() // a Cancel interrupts the command; its result still comes
	var a proto.ShellExecArgs
	if err := c.DecodeArgs(&a); err != nil {
		return nil, err
	}
	text, err := io.ReadAll(c.In)
	if err != nil {
		return nil, err
	}
	if c.Ctx.Err() != nil {
		// Cancelled before it ran (its input may have been cut short):
		// not run at all.
		return proto.ShellExecResult{ExitCode: 130, Interrupted: true}, nil
	}
	if len(text) != a.Length {
		return nil, proto.Errorf(proto.CodeInvalid, "the command arrived with %d of its %d bytes", len(text), a.Length)
	}
	command := string(text)
	if strings.IndexByte(command, 0) >= 0 || strings.TrimSpace(command) == "" {
		return nil, proto.Errorf(proto.CodeInvalid, "command is empty or contains a NUL byte")
	}
	s.mu.Lock()
	switch {
	case s.busy:
		s.mu.Unlock()
		return nil, proto.Errorf(proto.CodeBusy, "the shell is busy running another command")
	case s.ended:
		s.mu.Unlock()
		return nil, proto.Errorf(proto.CodeUnavailable, "the shell has ended")
	case s.attached:
		s.mu.Unlock()
		return nil, proto.Errorf(proto.CodeInvalid, "the shell is attached to the server, which runs its commands")
	}
	s.busy = true
	p := s.p
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.busy = false
		if s.ended {
			c.AfterEnd(s.exit)
		}
		s.mu.Unlock()
	}()
	if p == nil {
		if a.Init == "" {
			return nil, proto.Errorf(proto.CodeUnavailable, "no shell runs: the first command starts it with its init script")
		}
		if p, err = startShell(a.Init, a.NProc); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.p = p
		s.mu.Unlock()
		go s.watch(p)
	}
	res := s.run(c.Ctx, newSink(c), p, a, command)
	if res.ShellEnded {
		s.mu.Lock()
		s.ended = true
		s.mu.Unlock()
	}
	return res, nil
}

// watch waits for the shell's end; between commands, it ends the runner
// (and with it the jail). During one, the command reports it.
func (s *shellState) watch(p *shellProc) {
	<-p.exited
	defer close(s.watched)
	s.mu.Lock()
	s.ended = true
	busy := s.busy
	s.mu.Unlock()
	if !busy {
		s.exit()
	}
}

// end kills the shell and every process its commands started (the
// connection that owned it is gone). In a jail the jail's end does this
// anyway; a runner on a network outlives its connections.
func (s *shellState) end() {
	s.mu.Lock()
	p := s.p
	s.ended = true
	s.mu.Unlock()
	if p == nil || !p.alive() {
		return
	}
	signalCommand(p.pid, nil, syscall.SIGKILL)
	p.kill()
	<-s.watched
}

func (s *shellState) limit(c *Call) (any, error) {
	var a proto.ShellLimitArgs
	if err := c.DecodeArgs(&a); err != nil {
		return nil, err
	}
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	if p == nil || !p.alive() {
		return nil, nil // the next shell gets it from its init script
	}
	n := uint64(unix.RLIM_INFINITY)
	if a.FileSize >= 0 {
		n = uint64(a.FileSize)
	}
	if err := unix.Prlimit(p.pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: n, Max: n}, nil); err != nil {
		return nil, proto.Errorf(proto.CodeUnavailable, "set the shell's file size limit: %v", err)
	}
	return nil, nil
}

// limitProcs sets the shell's RLIMIT_NPROC to nproc (0: unchanged) while
// it waits for its first line. Lowering a limit needs no privilege; a
// hard limit already lower binds harder and is kept.
func limitProcs(pid int, nproc uint64) error {
	if nproc == 0 {
		return nil
	}
	var cur unix.Rlimit
	err := unix.Prlimit(pid, unix.RLIMIT_NPROC, nil, &cur)
	if err == nil {
		n := min(nproc, cur.Max)
		err = unix.Prlimit(pid, unix.RLIMIT_NPROC, &unix.Rlimit{Cur: n, Max: n}, nil)
	}
	if err != nil {
		return proto.Errorf(proto.CodeInternal, "start the shell: set its process limit (RLIMIT_NPROC): %v", err)
	}
	return nil
}

// startShell starts /bin/sh with its descriptors: commands on 0, the
// status record on 1 (its stdout between commands), the stderr pipe on 2
// and 8, /dev/null on 6, the stdout pipe on 7. The process limit is set
// before it reads its first line, then it runs init.
func startShell(init string, nproc uint64) (*shellProc, error) {
	var files []*os.File
	pipe := func() (r, w *os.File) {
		r, w, err := os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w
	}
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	stR, stW := pipe()
	null, err := os.Open(os.DevNull)
	if err == nil {
		files = append(files, null)
	}
	if err != nil || len(files) != 9 {
		for _, f := range files {
			f.Close()
		}
		return nil, proto.Errorf(proto.CodeInternal, "start the shell: no pipes")
	}
	// os.StartProcess rather than os/exec: the runner links less. The
	// environment is the runner's own (bwrap's --setenv).
	proc, err := os.StartProcess("/bin/sh", []string{"/bin/sh"}, &os.ProcAttr{
		Files: []*os.File{inR, stW, errW, nil, nil, nil, null, outW, errW}, // 3-5 closed
	})
	for _, f := range []*os.File{inR, outW, errW, stW, null} {
		f.Close()
	}
	if err != nil {
		for _, f := range []*os.File{inW, outR, errR, stR} {
			f.Close()
		}
		return nil, proto.Errorf(proto.CodeInternal, "start the shell: %v", err)
	}
	p := &shellProc{kill9: func() { _ = proc.Kill() }, pid: proc.Pid, stdin: inW, status: stR, exited: make(chan struct{}), statusDirty: true}
	go func() {
		ps, _ := proc.Wait()
		p.exitCode = exitStatus(ps)
		close(p.exited)
		p.interruptStatus() // a command waiting for its record learns now
	}()
	fail := func(err error) (*shellProc, error) {
		p.kill()
		for _, f := range []*os.File{inW, outR, errR, stR} {
			f.Close()
		}
		return nil, err
	}
	// dash's ulimit has no -u: the limit goes on the shell itself.
	if err := limitProcs(p.pid, nproc); err != nil {
		return fail(err)
	}
	for i, f := range []*os.File{outR, errR} {
		if p.pipes[i], err = newPipeReader(f); err != nil {
			return fail(proto.Errorf(proto.CodeInternal, "start the shell: %v", err))
		}
	}
	for _, pr := range p.pipes {
		go pr.loop()
	}
	if _, err := io.WriteString(inW, init); err != nil {
		return fail(proto.Errorf(proto.CodeInternal, "start the shell: write its init script: %v", err))
	}
	return p, nil
}

func (p *shellProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill kills the shell (not its children: they hold the jail, which the
// server replaces once the runner reports the shell's end).
func (p *shellProc) kill() {
	p.kill9()
	select {
	case <-p.exited:
	case <-time.After(2 * time.Second):
	}
}

// interruptStatus ends a wait for a status record at once.
func (p *shellProc) interruptStatus() {
	_ = p.status.SetReadDeadline(time.Unix(1, 0))
}

// readNow hands what the status pipe holds now to take, without waiting
// (a read deadline cannot do that: a passed one fails before reading).
func (p *shellProc) readNow(take func([]byte)) {
	rc, err := p.status.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		var buf [4096]byte
		for {
			n, _, _ := readOnce(fd, buf[:])
			if n == 0 {
				return
			}
			take(buf[:n])
		}
	})
}

// dropStaleStatus empties the status pipe when the last command did not
// end with a whole record: a late piece of it must not be read as the
// next command's.
func (p *shellProc) dropStaleStatus() {
	if p.statusDirty {
		p.statusDirty = false
		p.readNow(func([]byte) {})
	}
}

// waitEOF waits until stdout and stderr are drained to their end, at most d.
func (p *shellProc) waitEOF(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, pr := range p.pipes {
		select {
		case <-pr.eof:
		case <-t.C:
			return
		}
	}
}

// exitStatus turns a process state into a shell-style exit code.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// nextNonce returns a nonce no command can guess. Called with the turn.
func (s *shellState) nextNonce() string {
	if s.prefix == "" {
		var b [8]byte
		if _, err := unix.Getrandom(b[:], 0); err != nil {
			panic("runner: no randomness for the shell's nonces: " + err.Error())
		}
		s.prefix = hex.EncodeToString(b[:])
	}
	s.seq++
	return s.prefix + strconv.FormatUint(s.seq, 36)
}

// noteExports keeps the shell's `export -p` of a record and returns its
// version, which moves when it changes.
func (s *shellState) noteExports(rec statusRecord) uint64 {
	if s.exportsVer == 0 || !bytes.Equal(rec.exports, s.exports) {
		s.exports = append(s.exports[:0], rec.exports...)
		s.exportsVer++
	}
	return s.exportsVer
}
