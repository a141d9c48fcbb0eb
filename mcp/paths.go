package mcp

import (
	"errors"
	"io/fs"
	"os"
	"path"
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
	if err == nil {
		return nil
	}
	var ue *userError
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
