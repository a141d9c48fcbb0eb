package runner

import (
	"context"
	"io"
	"os"
	"sync"
	"time"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// Driver runs commands in a shell whose pipes this process holds: the
// server's side of a local jail's attached shell (proto.OpShellAttach).
// It is the code the runner runs for shell.exec (the same script around
// each command, the same status records with a per-command nonce, the
// same timeouts, interrupts, background-job bookkeeping and end of the
// shell), so both paths read the shell's output one way; only where the
// records go differs. Everything read from the pipes is the jail's and is
// bounded by the caller (Exec's rec).
type Driver struct {
	s *shellState
	p *shellProc
}

// DriverPipes are this process's ends of an attached shell's pipes:
// stdin's write end, the read ends of the status pipe, stdout and stderr.
// Made with os.Pipe (non-blocking, in Go's poller).
type DriverPipes struct {
	Stdin, Status, Stdout, Stderr *os.File
}

// DriverProc is what a Driver knows of the shell's process, which is not
// its child: pid (as this process sees it: /proc/PID/task/PID/children
// lists the shell's children), exited (closed once the shell is gone),
// its status once gone, and how to kill it.
type DriverProc struct {
	PID      int
	Exited   <-chan struct{}
	ExitCode func() int
	Kill     func()
}

// NewDriver takes over pipes and starts reading the shell's output.
func NewDriver(pipes DriverPipes, proc DriverProc) (*Driver, error) {
	p := &shellProc{kill9: proc.Kill, pid: proc.PID, stdin: pipes.Stdin, status: pipes.Status,
		exited: make(chan struct{}), statusDirty: true}
	for i, f := range []*os.File{pipes.Stdout, pipes.Stderr} {
		var err error
		if p.pipes[i], err = newPipeReader(f); err != nil {
			return nil, err
		}
	}
	for _, pr := range p.pipes {
		go pr.loop()
	}
	go func() {
		<-proc.Exited
		p.exitCode = proc.ExitCode()
		close(p.exited)
		p.interruptStatus()
	}()
	return &Driver{s: newShellState(func() {}), p: p}, nil
}

// Start writes the shell's init script, before its first command.
func (d *Driver) Start(init string) error {
	_ = d.p.stdin.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := io.WriteString(d.p.stdin, init)
	return err
}

// Exec runs one command (the caller runs one at a time, checked: no NUL,
// not blank) and hands its output to rec as records of proto.RecStdout,
// RecStderr and, when the shell's exports differ from the version
// a.Exports, RecExports. rec is called from several goroutines, never at
// once. a.Init, a.NProc and a.Length are ignored.
func (d *Driver) Exec(ctx context.Context, a proto.ShellExecArgs, command string, rec func(tag byte, b []byte)) proto.ShellExecResult {
	out := &directRecorder{rec: rec}
	return d.s.run(ctx, out, d.p, a, command)
}

// ExecUntil is Exec that stops waiting at until: a command that has not
// ended by then goes on, done is false, and rest (called once, on any
// goroutine) waits for its end. The caller's goroutine runs a short
// command to its end, with no goroutine of its own.
func (d *Driver) ExecUntil(ctx context.Context, a proto.ShellExecArgs, command string, rec func(tag byte, b []byte), until time.Time) (res proto.ShellExecResult, done bool, rest func() proto.ShellExecResult) {
	out := &directRecorder{rec: rec}
	return d.s.runUntil(ctx, out, d.p, a, command, until)
}

// Close releases the pipes this process holds (the shell is gone, or its
// jail is being killed).
func (d *Driver) Close() {
	d.p.stdin.Close()
	d.p.status.Close()
	// Not under the reader's lock: Close waits for a read in progress,
	// whose feed takes that lock. The reader sees the end and stops.
	for _, pr := range d.p.pipes {
		pr.f.Close()
	}
}

// directRecorder hands records to a function, one at a time.
type directRecorder struct {
	mu     sync.Mutex
	rec    func(tag byte, b []byte)
	closed bool
}

func (r *directRecorder) feed(tag byte) func([]byte) {
	return func(b []byte) { r.write(tag, b) }
}

func (r *directRecorder) write(tag byte, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed && len(b) > 0 {
		r.rec(tag, b)
	}
}

func (r *directRecorder) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}
