package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"github.com/go-git/go-billy/v5"
)

// rootFS is a read-only billy.Filesystem over an os.Root: go-git reads a
// local source repository through it, so that no link inside the
// repository (which a jail may have made) leads the server out of it, and
// nothing but regular files and directories is opened. Alternates with
// absolute paths fail for the same reason, and that is intended.
type rootFS struct{ r *os.Root }

var errReadOnly = errors.New("the source repository is read-only to warren")

func (f rootFS) rel(name string) string {
	name = filepath.ToSlash(name)
	if path.IsAbs(name) {
		// go-git hands absolute paths only for alternates; os.Root refuses
		// them, and so does this.
		return name
	}
	return path.Clean(name)
}

// Create is refused: the source is never modified.
func (f rootFS) Create(string) (billy.File, error) { return nil, errReadOnly }

// Open opens a regular file or a directory for reading.
func (f rootFS) Open(name string) (billy.File, error) { return f.OpenFile(name, os.O_RDONLY, 0) }

// OpenFile opens for reading only, non-blocking so that a FIFO cannot hang
// the server, and refuses what is not a regular file or a directory.
func (f rootFS) OpenFile(name string, flag int, _ os.FileMode) (billy.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		return nil, errReadOnly
	}
	file, err := f.r.OpenFile(f.rel(name), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		file.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("not a regular file (%s)", fi.Mode().Type())}
	}
	return rootFile{File: file, name: name}, nil
}

// Stat follows links that stay inside the repository.
func (f rootFS) Stat(name string) (os.FileInfo, error) { return f.r.Stat(f.rel(name)) }

// Lstat does not follow a final link.
func (f rootFS) Lstat(name string) (os.FileInfo, error) { return f.r.Lstat(f.rel(name)) }

// Readlink reads a link inside the repository.
func (f rootFS) Readlink(name string) (string, error) { return f.r.Readlink(f.rel(name)) }

// Rename is refused.
func (f rootFS) Rename(string, string) error { return errReadOnly }

// Remove is refused.
func (f rootFS) Remove(string) error { return errReadOnly }

// Join joins path elements.
func (f rootFS) Join(elem ...string) string { return filepath.Join(elem...) }

// TempFile is refused.
func (f rootFS) TempFile(string, string) (billy.File, error) { return nil, errReadOnly }

// ReadDir lists a directory; entries are stat'ed through the root, never
// by path.
func (f rootFS) ReadDir(name string) ([]os.FileInfo, error) {
	dir, err := f.r.Open(f.rel(name))
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := make([]os.FileInfo, 0, len(entries))
	for _, e := range entries {
		fi, err := f.r.Lstat(path.Join(f.rel(name), e.Name()))
		if err != nil {
			continue // gone since the listing
		}
		out = append(out, fi)
	}
	return out, nil
}

// MkdirAll is refused.
func (f rootFS) MkdirAll(string, os.FileMode) error { return errReadOnly }

// Symlink is refused.
func (f rootFS) Symlink(string, string) error { return errReadOnly }

// Chroot opens a subdirectory as a root of its own.
func (f rootFS) Chroot(name string) (billy.Filesystem, error) {
	r, err := f.r.OpenRoot(f.rel(name))
	if err != nil {
		return nil, err
	}
	return rootFS{r}, nil
}

// Root names the directory, for messages.
func (f rootFS) Root() string { return f.r.Name() }

// Capabilities says reading and seeking only.
func (f rootFS) Capabilities() billy.Capability { return billy.ReadCapability | billy.SeekCapability }

// rootFile is an os.File with billy's extra methods.
type rootFile struct {
	*os.File
	name string
}

func (f rootFile) Name() string { return f.name }

// Lock does nothing: the source is only read.
func (f rootFile) Lock() error { return nil }

// Unlock does nothing.
func (f rootFile) Unlock() error { return nil }
