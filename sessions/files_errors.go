package sessions

import (
	"errors"
	"io/fs"
	"syscall"

	"github.com/warrenhq/warren/sessions/errs"
)

// The refusals of file access (Files), matched with errors.Is. A missing
// entry matches fs.ErrNotExist (code not_found) instead.
var (
	// ErrBadPath refuses a path argument that names nothing: empty, or
	// with a NUL byte.
	ErrBadPath = errs.New(errs.Invalid, "bad path")
	// ErrOutside refuses a path, or a link along it, that leads out of
	// the workspace.
	ErrOutside = errs.New(errs.Invalid, "outside the workspace")
	// ErrTooManyLinks ends a walk through more symbolic links than the
	// kernel would follow (a loop).
	ErrTooManyLinks = errs.New(errs.Invalid, "too many symbolic links")
	// ErrNotRegular refuses an entry that is not a regular file where one
	// is read or replaced: a directory, a FIFO, a device, a socket.
	ErrNotRegular = errs.New(errs.Invalid, "not a regular file")
	// ErrNotDir refuses a file where a write needs a directory.
	ErrNotDir = errs.New(errs.Invalid, "not a directory")
	// ErrTooBig refuses a file over the reader's limit.
	ErrTooBig = errs.New(errs.Limit, "file too big")
	// ErrChanged ends a write whose entry the jail swapped while it was
	// made: retrying is safe.
	ErrChanged = errs.New(errs.Conflict, "changed while it was written")
)

// FileError is file access refused or failed on one entry. Its message
// says what is wrong; the fields let a caller that knows its own tools add
// what to do next with them.
type FileError struct {
	// Op is what failed: "resolve", "read", "write" or "mkdir".
	Op string
	// Path names the entry as the message does: the path as the caller
	// gave it, or as the jail sees it when the caller never named it.
	Path string
	// Jail is the entry as the jail sees it (/workspace/...), "" when
	// the path never resolved.
	Jail string
	// Type is what the entry is, with ErrNotRegular (fs.ModeDir, ...).
	Type fs.FileMode
	// Size and Limit go with ErrTooBig: the file's size, 0 when it grew
	// past Limit while it was read.
	Size, Limit int64
	// Err is one of the sentinels above, or the system's error.
	Err error
	// Message says what is wrong, in the runner's words, bounded.
	Message string
}

func (e *FileError) Error() string { return e.Message }

// Unwrap returns the sentinel or the system's error.
func (e *FileError) Unwrap() error { return e.Err }

// ErrorCode implements errs.Coder: not_found for a missing entry, invalid
// for a file where a path needs a directory, the sentinel's code
// otherwise, internal for other failures of the system.
func (e *FileError) ErrorCode() errs.Code {
	switch {
	case errors.Is(e.Err, fs.ErrNotExist):
		return errs.NotFound
	case errors.Is(e.Err, syscall.ENOTDIR):
		return errs.Invalid
	}
	return errs.CodeOf(e.Err)
}
