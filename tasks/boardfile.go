package tasks

import (
	"context"
	"errors"
	"fmt"
)

// BoardFile is the board's TASKS.md as the board reaches it. A board in
// a workspace reaches it through a runner in a jail of its own
// (RunnerFile): every name below the workspace is the jail's, which can
// turn TASKS.md into a link to a host secret, docs/ into a link to any
// directory, the file into a FIFO or a sparse file of any size, and only
// a process that sees nothing but the workspace is safe from that by
// construction. A board outside every workspace (the data directory, a
// --tasks path of the operator's) is reached by the server (Options.File
// nil): no jail controls those names.
//
// Whatever the way, the file is the one its path names and nothing else:
// no symbolic link along the path (even one that stays inside), a regular
// file without other hard links, of at most MaxFileSize bytes.
type BoardFile interface {
	// Stat returns the file's stamp as it is now, without reading it. A
	// missing file (or directory on the way) is a stamp that does not
	// exist, not an error.
	Stat(ctx context.Context) (FileStamp, error)
	// Read returns the file's content and the stamp of the version read;
	// a missing file gives no content and a stamp that does not exist.
	Read(ctx context.Context) ([]byte, FileStamp, error)
	// Write replaces the file with data, atomically, if it is still the
	// version was (or still missing, for a stamp that does not exist),
	// and returns the new file's stamp; it fails with ErrFileChanged,
	// having written nothing, when it is not. Missing directories are
	// created; a replaced file keeps its mode, owner and ACL. The new file
	// is synced to disk.
	Write(ctx context.Context, data []byte, was FileStamp) (FileStamp, error)
	// Close releases what the file holds (a runner's jail).
	Close() error
}

// FileStamp identifies one version of the board's file without reading
// it: a new inode (every rename), a new size or a new change time (every
// write, and user space cannot set it back) give a new stamp. Times are
// in nanoseconds since the epoch.
type FileStamp struct {
	Exists       bool
	Dev, Ino     uint64
	Size         int64
	Mtime, Ctime int64
}

// sig is the stamp as the board stores it (task_boards.file_sig).
func (s FileStamp) sig() string {
	if !s.Exists {
		return "missing"
	}
	return fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d", s.Dev, s.Ino, s.Size, s.Mtime/1e9, s.Mtime%1e9, s.Ctime/1e9, s.Ctime%1e9)
}

// ErrFileChanged is what BoardFile.Write fails with when the file is no
// longer the version it was to replace: the board merges it again.
var ErrFileChanged = errors.New("file changed during sync")

// errFileChanged is the board's name for it.
var errFileChanged = ErrFileChanged

// The refusals of a BoardFile, worded the same whichever way the file is
// reached. path is the host path of the entry concerned.

func linkError(path string, dir bool) error {
	if dir {
		return fmt.Errorf("%s is a symbolic link: the task board does not follow links; make it a directory", path)
	}
	return fmt.Errorf("%s is a symbolic link: the task board does not follow links; replace it with a regular file", path)
}

func notDirError(path string) error {
	return fmt.Errorf("%s is not a directory: move it away so the task board can use it", path)
}

// notRegularError refuses an entry that is not a regular file; what names
// it ("a FIFO", "a directory", …).
func notRegularError(path, what string) error {
	return fmt.Errorf("%s is not a regular file (%s): the task board only uses a regular file; remove it", path, what)
}

// hardLinksError refuses a file that is also elsewhere, perhaps outside
// the workspace: its content must not be copied into the board.
func hardLinksError(path string, links uint64) error {
	return fmt.Errorf("%s has %d hard links: the task board only uses a file that is nowhere else; replace it with a copy", path, links)
}

func tooBigError(path string, size int64) error {
	return fmt.Errorf("%s is %d bytes, over the task board's limit of %d (8 MiB): move what is not tasks to another file, or name another board with --tasks", path, size, MaxFileSize)
}
