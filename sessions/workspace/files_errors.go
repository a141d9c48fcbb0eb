package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
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
	msg string
}

func (e *FileError) Error() string { return e.msg }

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

// fileErrorf builds a FileError whose message is format.
func fileErrorf(op, shown, jail string, err error, format string, a ...any) *FileError {
	return &FileError{Op: op, Path: shown, Jail: jail, Err: err, msg: fmt.Sprintf(format, a...)}
}

// outside refuses the path p, which leads out of the workspace.
func (f *Files) outside(op, p string) error {
	return fileErrorf(op, p, "", ErrOutside,
		"path %q is outside the workspace: use a path relative to the workspace or under %s", p, f.mount)
}

// systemError turns an error of the system about the entry p (as the
// caller named it) into a FileError that says what it means. A FileError
// is returned as it is.
func (f *Files) systemError(op string, p Path, err error) error {
	var fe *FileError
	var pe *fs.PathError
	switch {
	case err == nil || errors.As(err, &fe):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return fileErrorf(op, p.Asked, p.Jail, err,
			"%s does not exist: check the path (it is relative to %s)", p.Asked, f.mount)
	case errors.Is(err, fs.ErrPermission):
		return fileErrorf(op, p.Asked, p.Jail, err, "%s: permission denied", p.Asked)
	case errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes"),
		strings.Contains(err.Error(), "path escapes"):
		// os.Root found a link out of the workspace (one the jail swapped
		// in after the path was resolved).
		return f.outside(op, p.Asked)
	}
	return fileErrorf(op, p.Asked, p.Jail, err, "%s: %v", p.Asked, err)
}
