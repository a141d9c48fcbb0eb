package sessions

import (
	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/sessions/workspace"
)

// Files is what the file tools do to a session's workspace, through its
// Runner: resolve a path the caller gave (links followed as the jail
// would, never out of the workspace), read a regular file up to a limit,
// replace one atomically. The local implementation is *workspace.Files;
// its errors are *workspace.FileError, coded, and matched with the
// sentinels of package workspace (and fs.ErrNotExist).
type Files interface {
	// Resolve turns a path argument (relative to the workspace, or
	// absolute under /workspace) into the entry it names.
	Resolve(asked string) (workspace.Path, error)
	// ReadFile reads the regular file at p, of at most limit bytes.
	ReadFile(p workspace.Path, limit int64) ([]byte, error)
	// WriteFile replaces the file at p with data atomically, creating
	// the directories it needs, as the jail's uid would.
	WriteFile(p workspace.Path, data []byte) error
	// Size is the size of the regular file at p, 0 when there is none.
	Size(p workspace.Path) int64
	// Close releases the workspace.
	Close() error
}

var _ Files = (*workspace.Files)(nil)

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

// WriteFile refuses to write data to p when that would take the session's
// workspace and home over its disk quota, before anything is written. The
// growth is the new size minus the size of the file it replaces, so that
// editing a file in a session near its quota works.
func (f *sessionFiles) WriteFile(p workspace.Path, data []byte) error {
	if !f.write {
		return errReadOnly
	}
	if err := f.m.CheckWrite(f.s, int64(len(data))-f.Size(p), "write "+p.Jail); err != nil {
		return err
	}
	return f.Files.WriteFile(p, data)
}
