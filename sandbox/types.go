// Package sandbox jails a persistent /bin/sh with bubblewrap. The jail's
// runner (sandbox/runner, docs/runner-protocol.md) owns the shell; a
// Shell is the server's side of it.
//
// A Shell owns one jail: a read-only root built from the host's /usr and
// /etc, the workspace bound read-write at /workspace, no network, no
// capabilities, sized tmpfs mounts and a clean environment. Commands run one
// at a time in the same shell, so cd and export persist between them. A
// command that times out or is cancelled is killed; the shell survives, and a
// shell that dies or wedges is restarted with its saved cwd and exports.
//
// The package knows nothing of MCP, SQL or users.
package sandbox

import (
	"time"

	"github.com/warrenhq/warren/sessions/errs"
)

// Errors returned by Shell, coded in warren's vocabulary (package errs).
// Callers translate them into their own protocol.
var (
	// ErrBusy is returned by Exec with ExecOptions.NoWait while another
	// command is running in the same shell.
	ErrBusy = errs.New(errs.Busy, "the shell is busy running another command")
	// ErrClosed is returned by Exec after Close.
	ErrClosed = errs.New(errs.Unavailable, "the shell is closed")
	// ErrDetached is Exec's answer when ExecOptions.DetachAt came before
	// the command's end: the command goes on, and ExecOptions.Detached
	// gets its result.
	ErrDetached = errs.New(errs.Busy, "the command is still running")
	// ErrEmptyCommand is returned for a command that is empty or only blanks.
	ErrEmptyCommand = errs.New(errs.Invalid, "command is empty")
	// ErrNULInCommand is returned for a command containing a NUL byte, which
	// no shell can represent.
	ErrNULInCommand = errs.New(errs.Invalid, "command contains a NUL byte")
)

// Stream names an output stream of a command.
type Stream int

// The two output streams of a command.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

func (s Stream) String() string {
	if s == Stderr {
		return "stderr"
	}
	return "stdout"
}

// ExecOptions tune one Exec call. The zero value is usable.
type ExecOptions struct {
	// Timeout bounds the command's wall-clock time; 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxOutput caps the bytes kept per stream (half head, half tail);
	// 0 means DefaultMaxOutput. The total is always counted.
	MaxOutput int
	// OnOutput, when set, receives output chunks as the command produces
	// them, in order, from the goroutine that reads the command's output.
	// The chunk is only valid during the call.
	OnOutput func(stream Stream, chunk []byte)
	// NoWait makes Exec fail with ErrBusy instead of queueing behind a
	// running command.
	NoWait bool
	// DetachAt, when set, is when Exec stops waiting for a command that
	// is still running: it returns ErrDetached instead of a result, the
	// command goes on (holding the shell's turn, its timeout and ctx
	// unchanged) and Detached receives its result when it ends. A caller
	// that must answer by then runs short commands without a goroutine of
	// its own and hands long ones over.
	DetachAt time.Time
	// Detached receives the result of a command Exec detached from.
	Detached func(Result, error)
}

// Defaults for ExecOptions.
const (
	DefaultTimeout   = 2 * time.Minute
	DefaultMaxOutput = 256 << 10
)

// Result is the outcome of one command. A command that fails, times out or
// is interrupted is still a Result; Exec returns an error only when it could
// not run the command at all.
type Result struct {
	// ExitCode is the command's exit status (128+signal when killed; -1 when
	// the command broke the shell's status descriptor and its status is lost).
	ExitCode int
	// Stdout and Stderr hold the captured bytes, raw: they may contain NUL
	// or invalid UTF-8. When truncated they hold the head, a marker line and
	// the tail.
	Stdout, Stderr []byte
	// StdoutBytes and StderrBytes count every byte the command wrote.
	StdoutBytes, StderrBytes int64
	// Truncated is true when either stream exceeded the cap.
	Truncated bool
	// Cwd is the shell's working directory after the command, as seen
	// inside the jail.
	Cwd string
	// Duration is the command's wall-clock time.
	Duration time.Duration
	// TimedOut is true when the command was killed at its timeout.
	TimedOut bool
	// Interrupted is true when the caller's context ended the command.
	Interrupted bool
	// ShellRestarted is true when the shell died or had to be killed and a
	// fresh one was started with the saved cwd and exports (for a runner on
	// the network: is started by the next command, NewNetShell).
	ShellRestarted bool
}

// State is what survives a shell restart: the working directory and the
// exported variables.
type State struct {
	// Cwd is a path inside the jail (under the mount point).
	Cwd string `json:"cwd"`
	// Env holds the exported variables with their values.
	Env map[string]string `json:"env"`
}
