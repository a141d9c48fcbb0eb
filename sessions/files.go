package sessions

import (
	"context"
	"io/fs"

	"github.com/warrenhq/warren/sessions/errs"
)

// Files is what the file tools do to a session's workspace, through its
// Runner. A path is the caller's, as given (relative to the workspace, or
// absolute under /workspace): the runner resolves it inside the jail,
// following links as the jail would, never out of the workspace, so the
// server never opens a workspace path itself. Refusals are *FileError,
// coded, and matched with the sentinels of files_errors.go (and
// fs.ErrNotExist).
type Files interface {
	// Read reads the regular file at path, of at most limit bytes.
	Read(ctx context.Context, path string, limit int64) (FileContent, error)
	// Write replaces the file at path with data atomically (or appends
	// data to it), creating the directories it needs, as the jail's uid.
	Write(ctx context.Context, path string, data []byte, opts WriteOptions) (FileWritten, error)
	// Edit replaces exact text in the file at path, atomically, in one
	// read and one write by the runner.
	Edit(ctx context.Context, path string, e EditOptions) (FileEdited, error)
	// Stat says what path names.
	Stat(ctx context.Context, path string) (FileStat, error)
}

// FileContent is a file Read read.
type FileContent struct {
	// Jail is the file as the jail sees it (/workspace/...).
	Jail string
	Data []byte
}

// WriteOptions are Write's.
type WriteOptions struct {
	// Append writes the data after the file's content, which must be at
	// most Limit bytes.
	Append bool
	Limit  int64
	// MaxGrow, unless negative, refuses a write that would grow the file
	// by more than this many bytes: nothing is written and the result is
	// Refused. The files OpenFiles hands out set it from the quota.
	MaxGrow int64
}

// FileWritten is what Write did.
type FileWritten struct {
	// Jail is the file as the jail sees it.
	Jail string
	// OldSize and Size are the file's sizes before and after (or, when
	// Refused, the size it would have had).
	OldSize, Size int64
	// Refused says that nothing was written: the write would have grown
	// the file past MaxGrow.
	Refused bool
}

// EditOptions are Edit's: Old must occur once in the file (of at most
// Limit bytes), or All replaces every occurrence. MaxGrow is
// WriteOptions'.
type EditOptions struct {
	Old, New string
	All      bool
	Limit    int64
	MaxGrow  int64
}

// FileEdited is what Edit did. Found counts the occurrences of the old
// text; nothing was written unless Replaced > 0.
type FileEdited struct {
	FileWritten
	Found, Replaced int
}

// FileStat is what Stat found.
type FileStat struct {
	// Jail is the entry the path resolves to, as the jail sees it.
	Jail   string
	Exists bool
	// Type is the entry's type bits (0 for a regular file).
	Type fs.FileMode
	// Size is a regular file's size.
	Size int64
}

// sessionFiles is a session's Files as OpenFiles hands it out: writes
// are checked against the session's quota before a byte is written.
type sessionFiles struct {
	Files
	m     *Manager
	s     *Session
	write bool
}

// errReadOnly refuses a write through files opened for reading: a
// mistake of the caller, not of the user.
var errReadOnly = errs.New(errs.Internal, "the files were opened for reading only")

// Write refuses to write data when that would take the session's
// workspace and home over its disk quota, before anything is written. The
// growth is the new size minus the size of the file it replaces, so that
// editing a file in a session near its quota works. The runner learns the
// room left and refuses more growth itself, so a write is one round trip;
// a refused one is judged by CheckWrite, which says why.
func (f *sessionFiles) Write(ctx context.Context, path string, data []byte, opts WriteOptions) (FileWritten, error) {
	if !f.write {
		return FileWritten{}, errReadOnly
	}
	var w FileWritten
	err := f.withinQuota(func(maxGrow int64) (FileWritten, error) {
		opts.MaxGrow = maxGrow
		var err error
		w, err = f.Files.Write(ctx, path, data, opts)
		return w, err
	})
	return w, err
}

// Edit is Write's for an edit.
func (f *sessionFiles) Edit(ctx context.Context, path string, e EditOptions) (FileEdited, error) {
	if !f.write {
		return FileEdited{}, errReadOnly
	}
	var ed FileEdited
	err := f.withinQuota(func(maxGrow int64) (FileWritten, error) {
		e.MaxGrow = maxGrow
		var err error
		ed, err = f.Files.Edit(ctx, path, e)
		return ed.FileWritten, err
	})
	return ed, err
}

// withinQuota runs write with the growth the quota leaves room for, and
// accounts what it wrote. A write refused for its growth is judged again
// by CheckWrite, which measures afresh: when it passes (the estimate was
// high), the write is made once more without a bound.
func (f *sessionFiles) withinQuota(write func(maxGrow int64) (FileWritten, error)) error {
	w, err := write(f.m.writeRoom(f.s))
	if err != nil || !w.Refused {
		if err == nil {
			f.m.wrote(f.s, w.Size-w.OldSize)
		}
		return err
	}
	if err := f.m.CheckWrite(f.s, w.Size-w.OldSize, "write "+w.Jail); err != nil {
		return err
	}
	w, err = write(-1)
	if err == nil && w.Refused {
		return errs.New(errs.Internal, "the runner refused a write that had no bound")
	}
	return err
}

// writeRoom is how many bytes a file write may add to s's usage without
// judging it again: what the quota leaves, -1 without a quota, 0 when the
// usage is over the quota or cannot be measured (every growth then goes
// through CheckWrite, which says why it is refused).
func (m *Manager) writeRoom(s *Session) int64 {
	q := m.cfg.QuotaBytes
	if q <= 0 {
		return -1
	}
	u := m.quota.get(s.ID)
	u.mu.Lock()
	defer u.mu.Unlock()
	m.measureLocked(s, u, q, false, true) // a file call starts the jail anyway
	if u.err != nil || u.bytes >= q {
		return 0
	}
	return q - u.bytes
}

// wrote counts grow bytes a file write added, as CheckWrite does for the
// writes it lets through.
func (m *Manager) wrote(s *Session, grow int64) {
	if m.cfg.QuotaBytes <= 0 || grow <= 0 {
		return
	}
	u := m.quota.get(s.ID)
	u.mu.Lock()
	u.written += grow
	u.mu.Unlock()
}
