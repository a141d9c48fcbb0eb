package sessions

import (
	"time"

	"github.com/warrenhq/warren/sessions/errs"
)

// A command's life in warren's terms: what a Runner is asked to run and
// what it answers. The local runner translates them to and from its jail's
// shell (sandbox.Shell); another runner (the fake of the tests, a runner
// reached over the network) has its own way of running the command and
// gives the same answers.

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

// MaxOutput is what a command's result keeps of each stream (half head,
// half tail) and what a job keeps of output nobody collected yet (the
// tail: errors are usually at the end).
const MaxOutput = 256 << 10

// RunOptions tune one command a Runner runs. The zero value is usable.
type RunOptions struct {
	// Timeout bounds the command's wall-clock time; 0: the runner's default.
	Timeout time.Duration
	// OnOutput, when set, receives output chunks as the command produces
	// them. The chunk is only valid during the call.
	OnOutput func(stream Stream, chunk []byte)
	// NoWait makes Exec fail with ErrRunnerBusy instead of queueing behind a
	// running command.
	NoWait bool
	// DetachAt, when set, is when Exec stops waiting for a command that is
	// still running: it returns ErrDetached, the command goes on (its
	// timeout and ctx unchanged) and Detached receives its result when it
	// ends.
	DetachAt time.Time
	// Detached receives the result of a command Exec detached from.
	Detached func(CommandResult, error)
}

// CommandResult is the outcome of one command. A command that fails, times
// out or is interrupted is still a result; a runner returns an error only
// when it could not run the command at all.
type CommandResult struct {
	// ExitCode is the command's exit status (128+signal when killed; -1
	// when its status is lost).
	ExitCode int
	// Stdout and Stderr hold the captured bytes, raw (maybe not UTF-8);
	// past MaxOutput they hold the head, a marker line and the tail.
	Stdout, Stderr []byte
	// StdoutBytes and StderrBytes count every byte the command wrote.
	StdoutBytes, StderrBytes int64
	// Truncated is true when either stream exceeded the cap.
	Truncated bool
	// Cwd is the shell's working directory after the command, as the jail
	// sees it.
	Cwd string
	// Duration is the command's wall-clock time.
	Duration time.Duration
	// TimedOut is true when the command was killed at its timeout.
	TimedOut bool
	// Interrupted is true when the caller's context ended the command.
	Interrupted bool
	// ShellRestarted is true when the shell died and a fresh one started
	// with the same cwd and exports.
	ShellRestarted bool
}

// ShellState is what survives a restart of a session's shell: its working
// directory and exported variables. The manager keeps it in the database.
type ShellState struct {
	// Cwd is a path as the jail sees it (under /workspace, /tmp, ...).
	Cwd string `json:"cwd"`
	// Env holds the exported variables with their values.
	Env map[string]string `json:"env"`
}

// Errors a Runner returns, in warren's vocabulary; a runner translates its
// own into these.
var (
	// ErrRunnerBusy: RunOptions.NoWait and another command runs.
	ErrRunnerBusy = errs.New(errs.Busy, "the shell is busy running another command")
	// ErrRunnerClosed: the runner was closed (the server is shutting down,
	// the session was archived or deleted).
	ErrRunnerClosed = errs.New(errs.Unavailable, "the shell is closed")
	// ErrDetached: RunOptions.DetachAt came before the command's end.
	ErrDetached = errs.New(errs.Busy, "the command is still running")
	// ErrEmptyCommand refuses a command that is empty or only blanks.
	ErrEmptyCommand = errs.New(errs.Invalid, "command is empty")
	// ErrNULInCommand refuses a command containing a NUL byte, which no
	// shell can represent.
	ErrNULInCommand = errs.New(errs.Invalid, "command contains a NUL byte")
)
