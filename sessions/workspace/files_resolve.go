package workspace

import (
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Resolve turns a path a caller gave (relative to the workspace, or
// absolute under the jail's mount point) into the entry it names, with the
// symbolic links along it followed as the jail would follow them, as long
// as they stay in the workspace.
func (f *Files) Resolve(asked string) (Path, error) {
	rel, err := f.relPath(asked)
	var size int64
	if err == nil {
		rel, size, err = f.resolve(rel)
	}
	if err != nil {
		return Path{}, f.systemError("resolve", Path{Asked: asked}, err)
	}
	return Path{Asked: asked, Rel: rel, Jail: f.jailPath(rel), size: size}, nil
}

// relPath turns a path argument into a path relative to the workspace
// root: relative paths as they are, absolute ones only under the mount
// point. os.Root then refuses anything that escapes, through ".." or
// symlinks, so a path checked here cannot be raced out of the workspace.
func (f *Files) relPath(p string) (string, error) {
	if p == "" {
		return "", fileErrorf("resolve", p, "", ErrBadPath, "path is empty: pass a path relative to the workspace, such as 'src/main.go'")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fileErrorf("resolve", p, "", ErrBadPath, "path contains a NUL byte: remove it")
	}
	if path.IsAbs(p) {
		rel, ok := strings.CutPrefix(path.Clean(p), f.mount)
		if !ok || (rel != "" && rel[0] != '/') {
			return "", f.outside("resolve", p)
		}
		p = strings.TrimPrefix(rel, "/")
	}
	p = path.Clean(p)
	if p == "" || p == "." {
		p = "."
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", f.outside("resolve", p)
	}
	return p, nil
}

// maxLinks bounds the symbolic links that resolve follows for one path, as
// the kernel's MAXSYMLINKS does, so that a loop ends.
const maxLinks = 40

// resolve follows the symbolic links along rel as the jail would, and
// returns the path they lead to, relative to the workspace and free of links
// when each step was checked. A link is followed while it stays in the
// workspace: a relative target from the link's directory, an absolute one
// only under the mount point, which is where the jail sees the workspace
// (os.Root refuses absolute links, since host code would resolve them
// against the host's root). A link that leads out is refused by name. A
// component that does not exist ends the walk: the rest is returned as it
// is, for a write to create.
//
// Every step goes through os.Root, and so does every later open of the
// result: a jail that swaps entries while this runs can only redirect the
// call to another place in the workspace, never out of it.
//
// The size of the entry, when it is a regular file, comes along: what a
// write replaces, for the quota, without another walk.
func (f *Files) resolve(rel string) (string, int64, error) {
	var size int64
	var done []string // resolved components: directories, and the last one
	todo := strings.Split(rel, "/")
	links, lastLink := 0, ""
	leadsOut := func(format string, a ...any) error {
		return fileErrorf("resolve", lastLink, lastLink, ErrOutside, format, a...)
	}
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 && lastLink == "" {
				return "", 0, f.outside("resolve", rel) // relPath lets none through
			}
			if len(done) == 0 {
				return "", 0, leadsOut("%s leads outside the workspace: the file tools follow links only within %s", lastLink, f.mount)
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(done, c)...)
		fi, err := f.root.Lstat(cur)
		if isNotExist(err) {
			if slices.Contains(todo, "..") {
				return "", 0, err
			}
			return path.Join(append(append(done, c), todo...)...), 0, nil
		}
		if err != nil {
			return "", 0, err
		}
		if fi.Mode().Type() != fs.ModeSymlink {
			done = append(done, c)
			size = 0
			if fi.Mode().IsRegular() {
				size = fi.Size()
			}
			continue
		}
		if links++; links > maxLinks {
			jail := f.jailPath(rel)
			return "", 0, fileErrorf("resolve", jail, jail, ErrTooManyLinks, "%s: too many symbolic links (a loop?)", jail)
		}
		target, err := f.root.Readlink(cur)
		if err != nil {
			return "", 0, err
		}
		lastLink = f.jailPath(cur)
		next := strings.Split(target, "/")
		if path.IsAbs(target) {
			in, ok := f.underMount(next)
			if !ok {
				return "", 0, leadsOut("%s is a symbolic link to %s, outside the workspace: the file tools follow links only within %s", lastLink, target, f.mount)
			}
			done, next = nil, in
		}
		todo = append(next, todo...)
	}
	if len(done) == 0 {
		return ".", 0, nil
	}
	return path.Join(done...), size, nil
}

// underMount returns the components of an absolute link target after the
// mount point, and false when the target is not under it. ".." at the
// root stays at the root, as the kernel has it. The mount point is one
// directory at the root (/workspace).
func (f *Files) underMount(parts []string) ([]string, bool) {
	mount := strings.TrimPrefix(f.mount, "/")
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

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
