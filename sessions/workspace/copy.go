package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Copied says what CopyTree copied and what it left out.
type Copied struct {
	Files, Dirs, Links int
	Bytes              int64
	// Left names what was not copied: sockets, FIFOs and devices, and
	// whatever lies on another file system.
	Left []string
}

// CopyTree copies the workspace that src streams (the source session's
// runner walks it inside its jail) into dst, a new empty directory that
// only the server knows yet (a forked session's workspace). scratch is an
// empty directory for a temporary object store; maxBytes bounds the
// content read.
//
// The stream is read as a snapshot's is (see treeWriter.write): bounded,
// names checked, into a git object store in scratch, so nothing the jail
// controls is opened by path on this side, and dst is then written from
// those objects through an os.Root.
//
// A copy that would be incomplete for a reason other than special files
// or other file systems (a file or the total over maxBytes, too many
// entries, nesting too deep, an unreadable entry, or entries that kept
// changing while they were read) is refused: a fork must not silently
// lack files. Modes are kept as git keeps them (executable or not); empty
// directories are not copied.
func CopyTree(ctx context.Context, src TreeSource, dst, scratch string, maxBytes int64) (Copied, error) {
	a, err := OpenAudit(scratch)
	if err != nil {
		return Copied{}, err
	}
	a.SetLimits(Limits{MaxFileBytes: maxBytes, MaxReadBytes: maxBytes})
	a.tw.cacheFile = "" // a one-off walk: no stat cache to keep
	tree, notes, err := a.tw.write(ctx, src)
	if err != nil {
		return Copied{}, err
	}
	var c Copied
	var refused []string
	for _, n := range notes {
		if strings.Contains(n, "(socket, FIFO or device)") || strings.Contains(n, "(on another file system)") {
			c.Left = append(c.Left, n)
		} else {
			refused = append(refused, n)
		}
	}
	if len(refused) > 0 {
		return Copied{}, invalid("the workspace cannot be copied whole: %s; stop what is changing it, or make it smaller, "+
			"and try again", strings.Join(refused, "; "))
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return Copied{}, fmt.Errorf("open copy: %w", err)
	}
	defer root.Close()
	t, err := object.GetTree(a.repo.Storer, tree)
	if err != nil {
		return Copied{}, fmt.Errorf("read copy: %w", err)
	}
	if err := c.write(ctx, a.repo.Storer, root, t, ""); err != nil {
		return Copied{}, err
	}
	return c, nil
}

// write materialises tree t at dir (relative to root).
func (c *Copied) write(ctx context.Context, st storer.EncodedObjectStorer, root *os.Root, t *object.Tree, dir string) error {
	for _, e := range t.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := path.Join(dir, e.Name)
		switch e.Mode {
		case filemode.Dir:
			sub, err := object.GetTree(st, e.Hash)
			if err != nil {
				return fmt.Errorf("read copy of %s: %w", p, err)
			}
			if err := root.Mkdir(p, 0o755); err != nil {
				return fmt.Errorf("copy %s: %w", p, err)
			}
			c.Dirs++
			if err := c.write(ctx, st, root, sub, p); err != nil {
				return err
			}
		case filemode.Regular, filemode.Executable:
			perm := os.FileMode(0o644)
			if e.Mode == filemode.Executable {
				perm = 0o755
			}
			n, err := copyBlob(st, e.Hash, root, p, perm)
			if err != nil {
				return fmt.Errorf("copy %s: %w", p, err)
			}
			c.Files++
			c.Bytes += n
		case filemode.Symlink:
			target, err := readBlob(st, e.Hash, 4096)
			if err != nil {
				return fmt.Errorf("copy %s: %w", p, err)
			}
			// The link as it was: its target is not looked at, here or
			// later by warren (every host-side open refuses to follow it).
			if err := root.Symlink(string(target), p); err != nil {
				return fmt.Errorf("copy %s: %w", p, err)
			}
			c.Links++
		}
	}
	return nil
}

func copyBlob(st storer.EncodedObjectStorer, h plumbing.Hash, root *os.Root, p string, perm os.FileMode) (int64, error) {
	b, err := object.GetBlob(st, h)
	if err != nil {
		return 0, err
	}
	r, err := b.Reader()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

func readBlob(st storer.EncodedObjectStorer, h plumbing.Hash, limit int64) ([]byte, error) {
	b, err := object.GetBlob(st, h)
	if err != nil {
		return nil, err
	}
	if b.Size > limit {
		return nil, errors.New("symlink target too long")
	}
	r, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, limit))
}
