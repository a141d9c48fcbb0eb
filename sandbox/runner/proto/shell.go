package proto

// The shell's operations: the runner owns the jail's persistent /bin/sh
// and runs one command at a time in it (docs/runner-protocol.md).
const (
	// OpShellExec runs one command in the shell (ShellExecArgs,
	// ShellExecResult). The command's text is the request's input (no
	// NUL, not blank; it may be larger than a frame's head). Its output stream is a sequence of records, each a
	// tag byte (RecStdout, RecStderr, RecExports), a 4-byte big-endian
	// length and that many bytes. Cancelling the stream interrupts the
	// command (SIGINT, then SIGKILL); the End still reports it.
	OpShellExec = "shell.exec"
	// OpShellLimit changes the running shell's RLIMIT_FSIZE
	// (ShellLimitArgs, no result); it fails when the kernel refuses, and
	// the server then restarts the jail with the new limit.
	OpShellLimit = "shell.limit"
)

// The tags of the records in OpShellExec's output.
const (
	RecStdout  byte = 1
	RecStderr  byte = 2
	RecExports byte = 3 // the shell's `export -p`, whole, once per change
)

// RecHeader is the length of a record's tag and length.
const RecHeader = 5

// StatusCap bounds the shell's status record (its `export -p`, exit code
// and directory) as either side holds it. An environment that large could
// not start a program (execve allows a few MiB in all, 128 KiB a
// variable); what the shell's own stdout carries beyond it outside a
// record (an EXIT trap running `yes`) is the command's stdout.
const StatusCap = 4 << 20

// MaxCwd bounds the working directory a result may report (PATH_MAX).
const MaxCwd = 4096

// ShellExecArgs are the arguments of OpShellExec.
type ShellExecArgs struct {
	// Length is the command's length in bytes: a command that arrives
	// shorter (its input ended early) is never run.
	Length int `json:"length"`
	// TimeoutMS bounds the command's wall-clock time.
	TimeoutMS int64 `json:"timeout_ms"`
	// Init, on the jail's first command, starts the shell: the script it
	// runs before the command (limits, environment, the saved state).
	Init string `json:"init,omitempty"`
	// NProc, with Init, is the shell's RLIMIT_NPROC (0: none).
	NProc uint64 `json:"nproc,omitempty"`
	// Exports is the version of the exports the server holds: the runner
	// sends its `export -p` (a RecExports record) when its own differs.
	Exports uint64 `json:"exports,omitempty"`
}

// ShellExecResult is the result of OpShellExec.
type ShellExecResult struct {
	// ExitCode is the command's status (128+signal when killed), or the
	// shell's when the shell ended.
	ExitCode int `json:"exit_code"`
	// Cwd is the shell's directory after the command (empty when the
	// shell ended without reporting one).
	Cwd string `json:"cwd,omitempty"`
	// Exports is the version of the shell's exports now (see
	// ShellExecArgs.Exports).
	Exports uint64 `json:"exports,omitempty"`
	// TimedOut and Interrupted say how a command that did not end by
	// itself was stopped.
	TimedOut    bool `json:"timed_out,omitempty"`
	Interrupted bool `json:"interrupted,omitempty"`
	// ShellEnded says the shell is gone (the command ended it, or it had
	// to be killed): the runner exits after this reply, and the server
	// starts a fresh jail with the saved state.
	ShellEnded bool `json:"shell_ended,omitempty"`
	// Background says processes the shell started are still alive
	// (background jobs).
	Background bool `json:"background,omitempty"`
}

// ShellLimitArgs are the arguments of OpShellLimit.
type ShellLimitArgs struct {
	// FileSize is the RLIMIT_FSIZE in bytes, soft and hard; negative
	// means none.
	FileSize int64 `json:"file_size"`
}

// OpShellAttach starts the jail's shell on the pipes the server made at
// the jail's start (the runner's --shell-fds), whose other ends the server
// holds: the runner is the shell's parent and owns its life (the process
// limit, signals, its end, which ends the runner and the jail with the
// shell's status), while a command's bytes go between the server and the
// shell directly (ShellAttachArgs, ShellAttachResult). The server then
// writes the init script and each command's script to the shell's stdin
// and reads its output and status records itself, with the same code as
// OpShellExec (runner.Driver). A runner started without the pipes refuses
// it; a runner whose shell is attached refuses OpShellExec.
const OpShellAttach = "shell.attach"

// ShellAttachArgs are the arguments of OpShellAttach.
type ShellAttachArgs struct {
	// NProc is the shell's RLIMIT_NPROC (0: none), set before the shell
	// reads its first line.
	NProc uint64 `json:"nproc,omitempty"`
}

// ShellAttachResult is the result of OpShellAttach.
type ShellAttachResult struct {
	// PID is the shell's pid in the jail.
	PID int `json:"pid"`
}
