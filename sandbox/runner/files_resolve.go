package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// workspace is the jail's workspace as the file operations reach it:
// through an os.Root of it, so that no path, ".." or link leads out,
// whatever the jail swaps in while an operation runs. Inside the jail
// the mount namespace already holds everything else out of reach; the
// root keeps the operations to the workspace as the tools promise.
type workspace struct {
	dir   string // where the runner finds the workspace (the mount point in a jail)
	mount string // where the jail sees it: messages, and absolute links

	mu   sync.Mutex
	root *os.Root
	fd   int // an O_PATH descriptor of dir, for exact operations (files_exact.go); 0 until opened
}

// open returns the workspace's root, opened once for the runner's life
// (a failure, such as too many open files, is tried again next time).
func (w *workspace) open() (*os.Root, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.root == nil {
		r, err := os.OpenRoot(w.dir)
		if err != nil {
			return nil, proto.Errorf(proto.CodeUnavailable, "the runner cannot open the workspace %s: %v", w.mount, err)
		}
		w.root = r
	}
	return w.root, nil
}

// resolved is an entry of the workspace that a caller named.
type resolved struct {
	asked string // as the caller gave it, for messages
	rel   string // relative to the workspace, links along it followed
	jail  string // as the jail sees it
}

// fault is a FileFault as an error.
type fault struct{ proto.FileFault }

func (f *fault) Error() string { return f.Message }

func faultf(kind, op, shown, jail, format string, a ...any) *fault {
	return &fault{proto.FileFault{Kind: kind, Op: op, Path: shown, Jail: jail, Message: fmt.Sprintf(format, a...)}}
}

func (w *workspace) jailPath(rel string) string {
	if rel == "." {
		return w.mount
	}
	return w.mount + "/" + rel
}

func (w *workspace) outside(op, p string) *fault {
	return faultf(proto.FaultOutside, op, p, "", "path %q is outside the workspace: use a path relative to the workspace or under %s", p, w.mount)
}

// systemError turns an error of the system about p into a fault that says
// what it means; a fault passes as it is.
func (w *workspace) systemError(op string, p resolved, err error) *fault {
	var f *fault
	switch {
	case errors.As(err, &f):
		return f
	case errors.Is(err, fs.ErrNotExist):
		return faultf(proto.FaultNotFound, op, p.asked, p.jail, "%s does not exist: check the path (it is relative to %s)", p.asked, w.mount)
	case errors.Is(err, fs.ErrPermission):
		return faultf(proto.FaultPermission, op, p.asked, p.jail, "%s: permission denied", p.asked)
	case strings.Contains(err.Error(), "path escapes"):
		// os.Root found a link out of the workspace (one the jail swapped
		// in after the path was resolved).
		return w.outside(op, p.asked)
	case errors.Is(err, syscall.ENOTDIR):
		return faultf(proto.FaultNotDirPath, op, p.asked, p.jail, "%s: %v", p.asked, err)
	}
	return faultf(proto.FaultSystem, op, p.asked, p.jail, "%s: %v", p.asked, err)
}

// resolve turns a path a caller gave (relative to the workspace, or
// absolute under the mount point) into the entry it names, with the
// symbolic links along it followed as the jail would follow them, as long
// as they stay in the workspace.
func (w *workspace) resolve(root *os.Root, asked string) (resolved, *fault) {
	rel, err := w.relPath(asked)
	if err == nil {
		rel, err = w.follow(root, rel)
	}
	if err != nil {
		return resolved{}, w.systemError("resolve", resolved{asked: asked}, err)
	}
	return resolved{asked: asked, rel: rel, jail: w.jailPath(rel)}, nil
}

// relPath turns a path argument into a path relative to the workspace
// root: relative paths as they are, absolute ones only under the mount
// point.
func (w *workspace) relPath(p string) (string, error) {
	if p == "" {
		return "", faultf(proto.FaultBadPath, "resolve", p, "", "path is empty: pass a path relative to the workspace, such as 'src/main.go'")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", faultf(proto.FaultBadPath, "resolve", p, "", "path contains a NUL byte: remove it")
	}
	if path.IsAbs(p) {
		rel, ok := strings.CutPrefix(path.Clean(p), w.mount)
		if !ok || (rel != "" && rel[0] != '/') {
			return "", w.outside("resolve", p)
		}
		p = strings.TrimPrefix(rel, "/")
	}
	p = path.Clean(p)
	if p == "" || p == "." {
		p = "."
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", w.outside("resolve", p)
	}
	return p, nil
}

// maxLinks bounds the symbolic links followed for one path, as the
// kernel's MAXSYMLINKS does, so that a loop ends.
const maxLinks = 40

// follow follows the symbolic links along rel as the jail would, and
// returns the path they lead to, relative to the workspace. A link is
// followed while it stays in the workspace: a relative target from the
// link's directory, an absolute one only under the mount point (os.Root
// refuses absolute links, which it would resolve against the runner's
// root). A link that leads out is refused by name. A component that does
// not exist ends the walk: the rest is returned as it is, for a write to
// create. Every step goes through the root, and so does every later open
// of the result: a jail that swaps entries meanwhile can only redirect
// the call to another place in the workspace.
func (w *workspace) follow(root *os.Root, rel string) (string, error) {
	var done []string // resolved components
	todo := strings.Split(rel, "/")
	links, lastLink := 0, ""
	leadsOut := func(format string, a ...any) error {
		return faultf(proto.FaultOutside, "resolve", lastLink, lastLink, format, a...)
	}
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 && lastLink == "" {
				return "", w.outside("resolve", rel) // relPath lets none through
			}
			if len(done) == 0 {
				return "", leadsOut("%s leads outside the workspace: the file tools follow links only within %s", lastLink, w.mount)
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(done, c)...)
		fi, err := root.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			if slices.Contains(todo, "..") {
				return "", err
			}
			return path.Join(append(append(done, c), todo...)...), nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode().Type() != fs.ModeSymlink {
			done = append(done, c)
			continue
		}
		if links++; links > maxLinks {
			jail := w.jailPath(rel)
			return "", faultf(proto.FaultTooManyLinks, "resolve", jail, jail, "%s: too many symbolic links (a loop?)", jail)
		}
		target, err := root.Readlink(cur)
		if err != nil {
			return "", err
		}
		lastLink = w.jailPath(cur)
		next := strings.Split(target, "/")
		if path.IsAbs(target) {
			in, ok := w.underMount(next)
			if !ok {
				return "", leadsOut("%s is a symbolic link to %s, outside the workspace: the file tools follow links only within %s", lastLink, target, w.mount)
			}
			done, next = nil, in
		}
		todo = append(next, todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return path.Join(done...), nil
}

// underMount returns the components of an absolute link target after the
// mount point, and false when the target is not under it. ".." at the
// root stays at the root, as the kernel has it. The mount point is one
// directory at the root (/workspace).
func (w *workspace) underMount(parts []string) ([]string, bool) {
	mount := strings.TrimPrefix(w.mount, "/")
	for i, c := range parts {
		switch c {
		case "", ".", "..":
			continue
		case mount:
			return parts[i+1:], true
		}
		return nil, false
	}
	return nil, false
}

// typeName names the type of a file mode (proto's FileType names).
func typeName(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return proto.TypeFile
	case m.IsDir():
		return proto.TypeDir
	case m&fs.ModeSymlink != 0:
		return proto.TypeSymlink
	case m&fs.ModeNamedPipe != 0:
		return proto.TypeFIFO
	case m&fs.ModeCharDevice != 0:
		return proto.TypeCharDev
	case m&fs.ModeDevice != 0:
		return proto.TypeBlockDev
	case m&fs.ModeSocket != 0:
		return proto.TypeSocket
	}
	return proto.TypeIrregular
}
