// Package fakerunner is an in-memory sessions.Runner for tests: it proves
// that the session manager does not care which runner it has, and is one
// leg of the Runner conformance suite (sessions/runnersuite).
//
// It understands a few commands, joined by ";" or "&&": cd DIR, export
// K=V, echo WORDS (">&2" sends the line to stderr), sleep SECONDS, true,
// false, pwd, and exit N (which ends the fake's "shell": the next command
// finds a new one with the same cwd and exports, as a real runner's). Words
// may be in single or double quotes, and $NAME expands. Anything else fails with
// exit status 127. It has no files: Files says so.
package fakerunner

import (
	"context"
	"errors"
	"maps"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/runnertest"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/errs"
)

// ErrNoFiles is Files' answer: the fake keeps no workspace.
var ErrNoFiles = errs.New(errs.Unavailable, "file operations are not supported by the fake runner")

// defaultTimeout is the fake's timeout of a command that names none.
const defaultTimeout = 2 * time.Minute

// Runner is the fake runner of one session.
type Runner struct {
	after func() string // sandbox.Options.AfterCommand
	turn  chan struct{} // holding its one token is running a command

	// mu protects the fields below.
	mu      sync.Mutex
	state   sessions.ShellState
	version uint64
	running bool
	closed  bool
	exited  bool               // the last command ended the shell (exit)
	stop    context.CancelFunc // interrupts the running command (StopAll)
	fsize   int64
	// commands counts the commands run (Commands).
	commands int
	// roots map the jail's paths to the host directories of the
	// session's workspace and home; conn serves the runner's operations
	// on them in this process (Runner), made on first use.
	roots map[string]string
	conn  *client.Conn
}

// New makes a fake runner with the saved state in opts, as
// sessions.Config.NewRunner; it closes opts.Workspace, which it does not
// use.
func New(p sandbox.Profile, opts sandbox.Options) (sessions.Runner, error) {
	if opts.Workspace != nil {
		opts.Workspace.Close()
	}
	st := sessions.ShellState{Cwd: sandbox.MountPoint}
	if opts.State != nil {
		st = sessions.ShellState(*opts.State)
	}
	r := NewWithState(st, opts.AfterCommand)
	r.roots = map[string]string{sandbox.MountPoint: p.Workspace}
	if p.Home != "" {
		r.roots[sandbox.HomeDir] = p.Home
	}
	return r, nil
}

// Runner serves the runner's operations on the session's directories in
// this process (runnertest.Serve): the tree walk and disk usage that
// snapshots, diffs and the quota ask for. It "starts the jail": the shell
// counts as running from then on.
func (r *Runner) Runner(context.Context) (*client.Conn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, sessions.ErrRunnerClosed
	}
	if r.roots == nil {
		return nil, ErrNoFiles
	}
	r.running = true
	return r.connLocked(), nil
}

// LiveRunner is Runner's connection while the shell runs, else nil.
func (r *Runner) LiveRunner() *client.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.running || r.closed || r.roots == nil {
		return nil
	}
	return r.connLocked()
}

// connLocked returns the in-process runner, serving it on first use.
// Called with r.mu held.
func (r *Runner) connLocked() *client.Conn {
	if r.conn == nil {
		r.conn = runnertest.Serve(r.roots)
	}
	return r.conn
}

// NewWithState makes a fake runner starting from st; after, when set, runs
// after every command and its note ends the command's stderr.
func NewWithState(st sessions.ShellState, after func() string) *Runner {
	if st.Cwd == "" {
		st.Cwd = sandbox.MountPoint
	}
	st.Env = maps.Clone(st.Env)
	if st.Env == nil {
		st.Env = map[string]string{}
	}
	r := &Runner{after: after, turn: make(chan struct{}, 1), state: st}
	r.turn <- struct{}{}
	return r
}

// Exec runs command, as sessions.Runner.
func (r *Runner) Exec(ctx context.Context, command string, opts sessions.RunOptions) (sessions.CommandResult, error) {
	switch {
	case strings.TrimSpace(command) == "":
		return sessions.CommandResult{}, sessions.ErrEmptyCommand
	case strings.IndexByte(command, 0) >= 0:
		return sessions.CommandResult{}, sessions.ErrNULInCommand
	}
	if r.isClosed() {
		return sessions.CommandResult{}, sessions.ErrRunnerClosed
	}
	if opts.NoWait {
		select {
		case <-r.turn:
		default:
			return sessions.CommandResult{}, sessions.ErrRunnerBusy
		}
	} else {
		select {
		case <-r.turn:
		case <-ctx.Done():
			return sessions.CommandResult{ExitCode: 130, Interrupted: true, Cwd: r.State().Cwd}, nil
		}
	}
	if r.isClosed() {
		r.turn <- struct{}{}
		return sessions.CommandResult{}, sessions.ErrRunnerClosed
	}
	type outcome struct {
		res sessions.CommandResult
		err error
	}
	done := make(chan outcome, 1)
	var mu sync.Mutex
	detached := false
	go func() {
		res := r.run(ctx, command, opts)
		r.turn <- struct{}{}
		mu.Lock()
		if detached {
			mu.Unlock()
			opts.Detached(res, nil)
			return
		}
		done <- outcome{res: res}
		mu.Unlock()
	}()
	if opts.DetachAt.IsZero() || opts.Detached == nil {
		o := <-done
		return o.res, o.err
	}
	t := time.NewTimer(time.Until(opts.DetachAt))
	defer t.Stop()
	select {
	case o := <-done:
		return o.res, o.err
	case <-t.C:
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case o := <-done:
		return o.res, o.err
	default:
		detached = true
		return sessions.CommandResult{}, sessions.ErrDetached
	}
}

// run runs command holding the turn.
func (r *Runner) run(ctx context.Context, command string, opts sessions.RunOptions) sessions.CommandResult {
	start := time.Now()
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.mu.Lock()
	restarted := r.exited
	r.exited, r.running, r.stop = false, true, cancel
	r.commands++
	r.mu.Unlock()
	var res sessions.CommandResult
	out := [2]*capped{{}, {}}
	write := func(s sessions.Stream, b []byte) {
		out[s-1].write(b)
		if opts.OnOutput != nil {
			opts.OnOutput(s, b)
		}
	}
	res.ExitCode = r.script(cctx, command, write)
	if err := cctx.Err(); err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			res.TimedOut, res.ExitCode = true, 137
		default:
			res.Interrupted, res.ExitCode = true, 130
		}
	}
	if r.after != nil {
		if n := r.after(); n != "" {
			write(sessions.Stderr, []byte(n+"\n"))
		}
	}
	r.mu.Lock()
	r.stop = nil
	res.Cwd = r.state.Cwd
	r.mu.Unlock()
	res.Stdout, res.StdoutBytes = out[0].bytes()
	res.Stderr, res.StderrBytes = out[1].bytes()
	res.Truncated = out[0].cut || out[1].cut
	res.Duration = time.Since(start)
	res.ShellRestarted = restarted
	return res
}

// script runs each command of a line, and returns the last status.
func (r *Runner) script(ctx context.Context, line string, write func(sessions.Stream, []byte)) int {
	status := 0
	for _, part := range splitCommands(line) {
		if part.and && status != 0 {
			continue
		}
		if ctx.Err() != nil {
			return status
		}
		var stop bool
		status, stop = r.one(ctx, r.words(part.text), write)
		if stop {
			return status
		}
	}
	return status
}

// one runs one simple command; stop: the shell exited.
func (r *Runner) one(ctx context.Context, w []string, write func(sessions.Stream, []byte)) (status int, stop bool) {
	if len(w) == 0 {
		return 0, false
	}
	switch w[0] {
	case "true":
		return 0, false
	case "false":
		return 1, false
	case "pwd":
		write(sessions.Stdout, []byte(r.State().Cwd+"\n"))
		return 0, false
	case "echo":
		stream, args := sessions.Stdout, w[1:]
		if n := len(args); n > 0 && args[n-1] == ">&2" {
			stream, args = sessions.Stderr, args[:n-1]
		}
		write(stream, []byte(strings.Join(args, " ")+"\n"))
		return 0, false
	case "cd":
		dir := sandbox.MountPoint
		if len(w) > 1 {
			dir = w[1]
		}
		r.mu.Lock()
		if !path.IsAbs(dir) {
			dir = path.Join(r.state.Cwd, dir)
		}
		r.state.Cwd = path.Clean(dir)
		r.version++
		r.mu.Unlock()
		return 0, false
	case "export":
		r.mu.Lock()
		for _, kv := range w[1:] {
			if k, v, ok := strings.Cut(kv, "="); ok {
				r.state.Env[k] = v
				r.version++
			}
		}
		r.mu.Unlock()
		return 0, false
	case "sleep":
		f, _ := strconv.ParseFloat(arg(w, 1), 64)
		t := time.NewTimer(time.Duration(f * float64(time.Second)))
		defer t.Stop()
		select {
		case <-t.C:
			return 0, false
		case <-ctx.Done():
			return 130, true
		}
	case "exit":
		n, _ := strconv.Atoi(arg(w, 1))
		r.mu.Lock()
		r.exited = true
		r.mu.Unlock()
		return n, true
	}
	write(sessions.Stderr, []byte("fake runner: "+w[0]+": command not understood\n"))
	return 127, false
}

func arg(w []string, i int) string {
	if i < len(w) {
		return w[i]
	}
	return ""
}

type part struct {
	text string
	and  bool // runs only if the previous one succeeded
}

// splitCommands splits a line at ";", "&&" and newlines outside quotes.
func splitCommands(line string) []part {
	var parts []part
	var b strings.Builder
	var quote byte
	and := false
	flush := func(nextAnd bool) {
		parts = append(parts, part{text: b.String(), and: and})
		b.Reset()
		and = nextAnd
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == ';' || c == '\n':
			flush(false)
			continue
		case c == '&' && i+1 < len(line) && line[i+1] == '&':
			flush(true)
			i++
			continue
		}
		b.WriteByte(c)
	}
	flush(false)
	return parts
}

// words splits a simple command into words, removing quotes and expanding
// $NAME outside single quotes.
func (r *Runner) words(s string) []string {
	var out []string
	var b strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'' && c != '\'':
			b.WriteByte(c)
		case c == quote:
			quote = 0
		case quote == 0 && (c == '\'' || c == '"'):
			quote, in = c, true
		case c == '$':
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			b.WriteString(r.lookup(s[i+1 : j]))
			i, in = j-1, true
		case quote == 0 && (c == ' ' || c == '\t'):
			if in {
				out = append(out, b.String())
				b.Reset()
				in = false
			}
		default:
			b.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, b.String())
	}
	return out
}

func (r *Runner) lookup(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name == "PWD" {
		return r.state.Cwd
	}
	return r.state.Env[name]
}

// capped keeps the head and tail of a stream past sessions.MaxOutput.
type capped struct {
	head, tail []byte
	total      int64
	cut        bool
}

func (c *capped) write(b []byte) {
	c.total += int64(len(b))
	half := sessions.MaxOutput / 2
	if n := half - len(c.head); n > 0 {
		k := min(n, len(b))
		c.head, b = append(c.head, b[:k]...), b[k:]
	}
	if len(b) == 0 {
		return
	}
	c.tail = append(c.tail, b...)
	if over := len(c.tail) - half; over > 0 {
		c.tail, c.cut = append([]byte(nil), c.tail[over:]...), true
	}
}

func (c *capped) bytes() ([]byte, int64) {
	out := append([]byte(nil), c.head...)
	if c.cut {
		out = append(out, "\n[... output truncated ...]\n"...)
	}
	return append(out, c.tail...), c.total
}

// Busy reports whether a command runs.
func (r *Runner) Busy() bool { return len(r.turn) == 0 }

// Background is false: the fake leaves no processes behind.
func (r *Runner) Background() bool { return false }

// StopAll interrupts the running command, if any.
func (r *Runner) StopAll(string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop == nil {
		return false
	}
	r.stop()
	return true
}

// State returns the cwd and exports.
func (r *Runner) State() sessions.ShellState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return sessions.ShellState{Cwd: r.state.Cwd, Env: maps.Clone(r.state.Env)}
}

// StateVersion counts the changes of State.
func (r *Runner) StateVersion() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.version
}

// Running reports whether the fake's "shell" is up: from its first
// command until Stop or Close.
func (r *Runner) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running
}

// Stop ends an idle shell, keeping its state; a busy one is left alone.
func (r *Runner) Stop() {
	select {
	case <-r.turn:
	default:
		return
	}
	r.mu.Lock()
	r.running = false
	r.mu.Unlock()
	r.turn <- struct{}{}
}

// Close ends the runner for good.
func (r *Runner) Close() error {
	r.mu.Lock()
	r.closed, r.running = true, false
	if r.stop != nil {
		r.stop()
	}
	conn := r.conn
	r.conn = nil
	r.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
	return nil
}

func (r *Runner) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// LimitFileSize records the cap; the fake writes no files.
func (r *Runner) LimitFileSize(n int64) {
	r.mu.Lock()
	r.fsize = n
	r.mu.Unlock()
}

// Owner is the test's own uid and gid.
func (r *Runner) Owner() (uid, gid int) { return os.Getuid(), os.Getgid() }

// Files is not supported by the fake.
func (r *Runner) Files(context.Context) (sessions.Files, error) { return nil, ErrNoFiles }

// Commands returns how many commands the runner ran.
func (r *Runner) Commands() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commands
}

var _ sessions.Runner = (*Runner)(nil)
