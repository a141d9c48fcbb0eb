package sandbox

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/client"
)

// RunnerJail is a jail that runs a runner and nothing else: no shell, no
// command, no network, the directory it serves bound at MountPoint, and
// of the host only what the runner's binary needs to start (/usr, for a
// runner linked dynamically). Its runner serves the file operations on
// that directory with the jail's identity, so no link or rename in it can
// lead the server anywhere: the task board reaches its TASKS.md this way
// when that lives in a workspace, which many sessions may bind, so that
// no one session's runner owns it.
//
// The jail starts on the first call of Runner and again whenever its
// runner has ended (killed, crashed): the next call starts a fresh one.
type RunnerJail struct {
	dir    string   // for messages
	ws     *os.File // the directory, bound by descriptor
	bwrap  string
	runner string

	mu       sync.Mutex
	live     *runnerProc
	cred     *syscall.Credential
	prepared bool // the directory was handed to the jail's uid
	closed   bool
	starts   int
}

// runnerProc is one start of a RunnerJail: bwrap and the runner's
// connection.
type runnerProc struct {
	cmd    *exec.Cmd
	conn   *client.Conn
	exited chan struct{}
	id     fileID
}

// RunnerJailOptions tune NewRunnerJail.
type RunnerJailOptions struct {
	// Bwrap is the bubblewrap binary; empty means FindBwrap's choice.
	Bwrap string
	// Runner is the runner's binary; empty means FindRunner's choice.
	Runner string
}

// NewRunnerJail checks dir and returns a RunnerJail serving it; nothing
// starts until Runner is called. dir is opened now, and every jail binds
// that directory, whatever the path names later.
func NewRunnerJail(dir string, opts RunnerJailOptions) (*RunnerJail, error) {
	ws, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("runner jail for %s: %w", dir, err)
	}
	fi, err := ws.Stat()
	if err != nil || !fi.IsDir() {
		ws.Close()
		return nil, fmt.Errorf("runner jail for %s: not a directory", dir)
	}
	bw, err := FindBwrap(opts.Bwrap)
	if err == nil {
		opts.Runner, err = FindRunner(opts.Runner)
	}
	if err != nil {
		ws.Close()
		return nil, err
	}
	return &RunnerJail{dir: dir, ws: ws, bwrap: bw, runner: opts.Runner}, nil
}

// Runner returns the connection to the jail's runner, starting the jail
// when none runs or its runner has ended.
func (j *RunnerJail) Runner(ctx context.Context) (*client.Conn, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil, ErrClosed
	}
	if p := j.live; p != nil {
		if !isDone(p.conn.Done()) && !isDone(p.exited) {
			return p.conn, nil
		}
		p.stop()
		j.live = nil
	}
	p, err := j.start(ctx)
	if err != nil {
		return nil, err
	}
	j.live = p
	j.starts++
	return p.conn, nil
}

// Close stops the jail. Calls in flight fail; Runner fails from now on.
func (j *RunnerJail) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	if j.live != nil {
		j.live.stop()
		j.live = nil
	}
	return j.ws.Close()
}

// stop kills the jail and waits for it.
func (p *runnerProc) stop() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
	<-p.exited
	p.conn.Close()
}

// credential is the uid a root server runs the jail as: the directory's
// owner, or nobody for a directory of root's, as for a session's jail.
func (j *RunnerJail) credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if j.cred == nil {
		var st unix.Stat_t
		if err := unix.Fstat(int(j.ws.Fd()), &st); err != nil {
			return nil, fmt.Errorf("runner jail for %s: %w", j.dir, err)
		}
		uid, gid := st.Uid, st.Gid
		if uid == 0 {
			uid, gid = 65534, 65534
		}
		j.cred = &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}
	}
	return j.cred, nil
}

// start starts bwrap with the runner as its only program and waits for
// the runner's hello.
func (j *RunnerJail) start(ctx context.Context) (*runnerProc, error) {
	cred, err := j.credential()
	if err != nil {
		return nil, err
	}
	if !j.prepared {
		// As a session's jail: the jail's uid gets the directory through
		// an ACL (grant, don't give) when it is not the owner.
		if err := prepareWorkspace(j.dir, procPath(j.ws), cred); err != nil {
			return nil, err
		}
		j.prepared = true
	}
	var files []*os.File // the child's ends, closed once it has them
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	fds := JailFDs{Info: -1, Seccomp: -1, ProxyCtl: -1}
	extra := []*os.File{}
	if prog := seccompProgram(); prog != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("start the runner jail: %w", err)
		}
		files = append(files, r)
		_, err = w.Write(prog)
		w.Close()
		if err != nil {
			return nil, fmt.Errorf("start the runner jail: seccomp program: %w", err)
		}
		fds.Seccomp = 3 + len(extra)
		extra = append(extra, r)
	}
	ws, err := dupFile(j.ws)
	if err != nil {
		return nil, fmt.Errorf("start the runner jail: %w", err)
	}
	files = append(files, ws)
	fds.Workspace = 3 + len(extra)
	extra = append(extra, ws)
	rn, err := openRunner(j.runner, 3+len(extra), &fds)
	if err != nil {
		return nil, err
	}
	rn.widen(boardPipeSize)
	files = append(files, rn.bin, rn.jail[0], rn.jail[1])
	extra = append(extra, rn.child()...)
	cmd := exec.Command(j.bwrap, runnerJailArgs(fds, dynamic(rn.bin))...)
	cmd.Env = []string{}
	stderr := &headBuffer{max: 2048}
	cmd.Stderr = stderr
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred, Setpgid: true}
	p := &runnerProc{cmd: cmd, exited: make(chan struct{}), id: rn.id}
	started := make(chan error, 1)
	// Pdeathsig fires when the thread that forked the child exits: this
	// goroutine keeps its thread for the jail's life (as startJail's).
	go func() {
		runtime.LockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			_ = cmd.Wait()
		}
		close(p.exited)
	}()
	if err := <-started; err != nil {
		rn.close()
		return nil, fmt.Errorf("start the runner jail: %w", err)
	}
	p.conn = rn.connect()
	if _, err := p.conn.Hello(ctx); err != nil {
		p.stop()
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("start the runner jail for %s: %s (run 'warren doctor')", j.dir, msg)
		}
		return nil, fmt.Errorf("start the runner jail for %s: %w (run 'warren doctor')", j.dir, err)
	}
	return p, nil
}

// runnerJailArgs is bwrap's argument list for a runner jail: the jail of
// BwrapArgs without a shell, /etc, /dev, /tmp or a home, with /usr only
// for a runner linked dynamically, and the runner as its program.
func runnerJailArgs(fds JailFDs, withUsr bool) []string {
	a := []string{
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--clearenv", "--uid", "1000", "--gid", "1000",
	}
	if withUsr {
		a = append(a, "--ro-bind", "/usr", "/usr",
			"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64")
	}
	a = append(a, "--proc", "/proc", "--bind-fd", strconv.Itoa(fds.Workspace), MountPoint, "--remount-ro", "/")
	if fds.Seccomp >= 0 {
		a = append(a, "--seccomp", strconv.Itoa(fds.Seccomp))
	}
	return append(a, "--", "/proc/self/fd/"+strconv.Itoa(fds.Runner), "--conn", strconv.Itoa(fds.Conn)+","+strconv.Itoa(fds.Conn+1))
}

// dynamic reports whether the ELF binary f names a program interpreter
// (the dynamic linker, in /usr): 'just build' links the runner
// statically, 'go install' may not. Anything unexpected counts as
// dynamic: the jail then has /usr rather than failing to start. (Read by
// hand: debug/elf would add 200 KB to warren for four fields.)
func dynamic(f *os.File) bool {
	var h [64]byte
	if _, err := f.ReadAt(h[:], 0); err != nil || string(h[:4]) != "\x7fELF" {
		return true
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if h[5] == 2 {
		bo = binary.BigEndian
	}
	var off int64
	var size, n int
	switch h[4] {
	case 1: // 32-bit
		off, size, n = int64(bo.Uint32(h[28:])), int(bo.Uint16(h[42:])), int(bo.Uint16(h[44:]))
	case 2: // 64-bit
		off, size, n = int64(bo.Uint64(h[32:])), int(bo.Uint16(h[54:])), int(bo.Uint16(h[56:]))
	default:
		return true
	}
	if size < 4 || n <= 0 || n > 256 {
		return true
	}
	ph := make([]byte, size*n)
	if _, err := f.ReadAt(ph, off); err != nil {
		return true
	}
	const ptInterp = 3
	for i := range n {
		if bo.Uint32(ph[i*size:]) == ptInterp {
			return true
		}
	}
	return false
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.b)
}
