package mcp

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/warrenhq/warren/sandbox"
)

// workspacePath turns a tool's path argument into a path relative to the
// workspace root: relative paths as they are, absolute ones only under
// /workspace. os.Root then refuses anything that escapes, through ".." or
// symlinks, so a path checked here cannot be raced out of the workspace.
func workspacePath(p string) (string, error) {
	if p == "" {
		return "", errorf("path is empty: pass a path relative to the workspace, such as 'src/main.go'")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errorf("path contains a NUL byte: remove it")
	}
	if path.IsAbs(p) {
		rel, ok := strings.CutPrefix(path.Clean(p), sandbox.MountPoint)
		if !ok || (rel != "" && rel[0] != '/') {
			return "", outside(p)
		}
		p = strings.TrimPrefix(rel, "/")
	}
	p = path.Clean(p)
	if p == "" || p == "." {
		p = "."
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", outside(p)
	}
	return p, nil
}

func outside(p string) error {
	return errorf("path %q is outside the workspace: use a path relative to the workspace or under /workspace", p)
}

// fileError translates an os.Root error into a message that says what to do.
func fileError(p string, err error) error {
	var ue *userError
	if err == nil || errors.As(err, &ue) {
		return err // nothing to translate
	}
	if errors.As(fileMessage(p, err), &ue) {
		ue.err = err // callers may still ask errors.Is(err, fs.ErrNotExist)
		return ue
	}
	return fileMessage(p, err)
}

func fileMessage(p string, err error) error {
	var pe *fs.PathError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return errorf("%s does not exist: check the path (it is relative to /workspace), or create it with write_file", p)
	case errors.Is(err, fs.ErrPermission):
		return errorf("%s: permission denied", p)
	case errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes"):
		return outside(p)
	case strings.Contains(err.Error(), "path escapes"):
		return outside(p)
	}
	return errorf("%s: %v", p, err)
}

// openRoot opens the workspace as an os.Root.
func openRoot(workspace string) (*os.Root, error) {
	r, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, errorf("cannot open the workspace %s: %v", workspace, err)
	}
	return r, nil
}

// maxLinks bounds the symbolic links that resolve follows for one path, as
// the kernel's MAXSYMLINKS does, so that a loop ends.
const maxLinks = 40

// resolve follows the symbolic links along rel as the jail would, and
// returns the path they lead to, relative to the workspace and free of links
// when each step was checked. A link is followed while it stays in the
// workspace: a relative target from the link's directory, an absolute one
// only under /workspace, which is where the jail sees the workspace
// (os.Root refuses absolute links, since host code would resolve them
// against the host's root). A link that leads out is refused by name. A
// component that does not exist ends the walk: the rest is returned as it
// is, for write_file to create.
//
// Every step goes through os.Root, and so does every later open of the
// result: a jail that swaps entries while this runs can only redirect the
// call to another place in the workspace, never out of it.
func (w *ws) resolve(rel string) (string, error) {
	var done []string // resolved components: directories, and the last one
	todo := strings.Split(rel, "/")
	links, lastLink := 0, ""
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 && lastLink == "" {
				return "", outside(rel) // workspacePath lets none through
			}
			if len(done) == 0 {
				return "", errorf("%s leads outside the workspace: the file tools follow links only within /workspace", lastLink)
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(done, c)...)
		fi, err := w.root.Lstat(cur)
		if isNotExist(err) {
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
			return "", errorf("%s: too many symbolic links (a loop?): look at them with shell_exec 'ls -l'", jailPath(rel))
		}
		target, err := w.root.Readlink(cur)
		if err != nil {
			return "", err
		}
		lastLink = jailPath(cur)
		next := strings.Split(target, "/")
		if path.IsAbs(target) {
			in, ok := underMountPoint(next)
			if !ok {
				return "", errorf("%s is a symbolic link to %s, outside the workspace: the file tools follow links only within /workspace", lastLink, target)
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

// underMountPoint returns the components of an absolute link target after
// /workspace, and false when the target is not under /workspace. ".." at
// the root stays at the root, as the kernel has it.
func underMountPoint(parts []string) ([]string, bool) {
	mount := strings.TrimPrefix(sandbox.MountPoint, "/")
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
