package runner

import (
	"errors"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// Exact operations (Exact in a file operation's arguments) reach the
// entry a path names and nothing else: no symbolic link anywhere along it,
// even one that stays in the workspace, and no regular file with other
// hard links. They serve the task board's TASKS.md, whose every version
// matters: each result carries the file's stamp, and a write is a
// compare-and-write against one (see proto.FileWriteArgs). Every
// directory is opened from the workspace's root descriptor with
// O_NOFOLLOW, so what the jail swaps in meanwhile fails the operation,
// never redirects it.

// staleTemp is how old a temporary file of an exact write's name must be
// before a later exact write removes it: far longer than any write takes.
const staleTemp = time.Minute

// maxScan bounds the names an exact write looks at for stale temporary
// files: a directory the jail filled must not slow every write down.
const maxScan = 4096

// rootFD returns a descriptor of the workspace's root, opened once.
func (w *workspace) rootFD() (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd <= 0 {
		fd, err := unix.Open(w.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, proto.Errorf(proto.CodeUnavailable, "the runner cannot open the workspace %s: %v", w.mount, err)
		}
		w.fd = fd
	}
	return w.fd, nil
}

// exactPath splits a path for an exact operation into its directories
// and its name, relative to the workspace.
func (w *workspace) exactPath(asked string) (dirs []string, base, rel string, f *fault) {
	rel, err := w.relPath(asked)
	if err != nil {
		return nil, "", "", w.systemError("resolve", resolved{asked: asked}, err)
	}
	if rel == "." {
		return nil, "", "", w.notFile(rel)
	}
	parts := strings.Split(rel, "/")
	return parts[:len(parts)-1], parts[len(parts)-1], rel, nil
}

// exactDir opens the directory of an exact path, each component without
// following a link; with create, missing directories are made (0777 under
// the umask, or the parent's default ACL). Without create a missing
// directory gives -1 and no fault: the file does not exist. The caller
// closes what it returns.
func (w *workspace) exactDir(dirs []string, create bool) (int, *fault) {
	root, err := w.rootFD()
	if err != nil {
		return -1, &fault{proto.FileFault{Kind: proto.FaultSystem, Op: "resolve", Path: w.mount, Message: err.Error()}}
	}
	fd, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, faultf(proto.FaultSystem, "resolve", w.mount, w.mount, "%s: %v", w.mount, err)
	}
	for i, name := range dirs {
		const flags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		next, err := unix.Openat(fd, name, flags, 0)
		if err == unix.ENOENT && create {
			if err = unix.Mkdirat(fd, name, 0o777); err == nil || err == unix.EEXIST {
				next, err = unix.Openat(fd, name, flags, 0)
			}
		}
		if err == unix.ENOENT && !create {
			unix.Close(fd)
			return -1, nil
		}
		if err != nil {
			f := w.exactFault("resolve", fd, name, strings.Join(dirs[:i+1], "/"), err)
			unix.Close(fd)
			return -1, f
		}
		unix.Close(fd)
		fd = next
	}
	return fd, nil
}

// exactFault says why the entry name of the directory dir (rel in the
// workspace) cannot be used: a link, something else where a directory
// is needed, or an error of the system.
func (w *workspace) exactFault(op string, dir int, name, rel string, err error) *fault {
	jail := w.jailPath(rel)
	var st unix.Stat_t
	if (err == unix.ELOOP || err == unix.ENOTDIR) && unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			f := faultf(proto.FaultLink, op, jail, jail, "%s is a symbolic link", jail)
			f.Type = proto.TypeSymlink
			return f
		}
		return faultf(proto.FaultNotDir, op, jail, jail, "%s is not a directory", jail)
	}
	if err == unix.EACCES || err == unix.EPERM {
		return faultf(proto.FaultPermission, op, jail, jail, "%s: permission denied", jail)
	}
	return faultf(proto.FaultSystem, op, jail, jail, "%s: %v", jail, err)
}

// regularFault refuses what an exact operation cannot use: anything but
// a regular file without other hard links.
func (w *workspace) regularFault(op, rel string, st *unix.Stat_t) *fault {
	jail := w.jailPath(rel)
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		f := faultf(proto.FaultLink, op, jail, jail, "%s is a symbolic link", jail)
		f.Type = proto.TypeSymlink
		return f
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		f := faultf(proto.FaultNotRegular, op, jail, jail, "%s is not a regular file", jail)
		f.Type = typeName(fileType(st.Mode))
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			f.Type = proto.TypeDir
		}
		return f
	case st.Nlink > 1:
		return faultf(proto.FaultHardLinks, op, jail, jail, "%s has %d hard links", jail, st.Nlink)
	}
	return nil
}

func (w *workspace) statExact(asked string) proto.FileStatResult {
	dirs, base, rel, f := w.exactPath(asked)
	if f != nil {
		return proto.FileStatResult{Fault: &f.FileFault}
	}
	res := proto.FileStatResult{Jail: w.jailPath(rel)}
	dfd, f := w.exactDir(dirs, false)
	if f != nil {
		res.Fault = &f.FileFault
		return res
	}
	if dfd < 0 {
		return res
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	switch err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == unix.ENOENT:
		return res
	case err != nil:
		res.Fault = &w.exactFault("resolve", dfd, base, rel, err).FileFault
		return res
	}
	res.Exists = true
	if f := w.regularFault("resolve", rel, &st); f != nil {
		res.Fault = &f.FileFault
		return res
	}
	stamp := fileStamp(&st)
	res.Type, res.Size, res.Stamp = proto.TypeFile, st.Size, &stamp
	return res
}

func (w *workspace) readExact(a proto.FileReadArgs, out io.Writer) proto.FileReadResult {
	dirs, base, rel, f := w.exactPath(a.Path)
	if f != nil {
		return proto.FileReadResult{Fault: &f.FileFault}
	}
	jail := w.jailPath(rel)
	res := proto.FileReadResult{Jail: jail}
	dfd, f := w.exactDir(dirs, false)
	if f == nil && dfd < 0 {
		f = faultf(proto.FaultNotFound, "read", jail, jail, "%s does not exist", jail)
	}
	if f != nil {
		res.Fault = &f.FileFault
		return res
	}
	defer unix.Close(dfd)
	// Non-blocking: a FIFO would block the open forever.
	fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ENOENT:
		f = faultf(proto.FaultNotFound, "read", jail, jail, "%s does not exist", jail)
	case err != nil:
		f = w.exactFault("read", dfd, base, rel, err)
	}
	if f != nil {
		res.Fault = &f.FileFault
		return res
	}
	fh := os.NewFile(uintptr(fd), jail)
	defer fh.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		res.Fault = &faultf(proto.FaultSystem, "read", jail, jail, "%s: %v", jail, err).FileFault
		return res
	}
	stamp := fileStamp(&st)
	res.Stamp = &stamp
	if f := w.regularFault("read", rel, &st); f != nil {
		res.Fault = &f.FileFault
		return res
	}
	if st.Size > a.Limit {
		f := faultf(proto.FaultTooBig, "read", jail, jail, "%s is %d bytes, over the limit of %d", jail, st.Size, a.Limit)
		f.Size, f.Limit = st.Size, a.Limit
		res.Fault = &f.FileFault
		return res
	}
	buf := make([]byte, min(a.Limit, st.Size, 256<<10)+1)
	n, err := io.CopyBuffer(out, io.LimitReader(fh, a.Limit), buf)
	if err == nil && n == a.Limit {
		var one [1]byte
		if m, _ := fh.Read(one[:]); m > 0 {
			f := faultf(proto.FaultTooBig, "read", jail, jail, "%s grew past the limit of %d bytes while it was read", jail, a.Limit)
			f.Limit = a.Limit
			res.Fault, res.Size = &f.FileFault, n
			return res
		}
	}
	if err != nil {
		res.Fault, res.Size = &faultf(proto.FaultSystem, "read", jail, jail, "%s: %v", jail, err).FileFault, n
		return res
	}
	res.Size = n
	return res
}

func (w *workspace) writeExact(a proto.FileWriteArgs, in io.Reader) (proto.FileWriteResult, error) {
	if a.Append || a.IfMissing && a.IfStamp != nil {
		return proto.FileWriteResult{}, proto.Errorf(proto.CodeInvalid, "an exact write neither appends nor expects a file both missing and there")
	}
	dirs, base, rel, f := w.exactPath(a.Path)
	if f != nil {
		return proto.FileWriteResult{Fault: &f.FileFault}, nil
	}
	jail := w.jailPath(rel)
	res := proto.FileWriteResult{Jail: jail}
	// The compare runs first on an existing directory: a write expected
	// to replace a file never creates the directories it was in.
	dfd, f := w.exactDir(dirs, a.IfStamp == nil)
	if f == nil && dfd < 0 {
		f = faultf(proto.FaultChanged, "write", jail, jail, "%s changed (it is gone) since it was read: read it again", jail)
	}
	if f != nil {
		res.Size, res.Fault = 0, &f.FileFault
		return res, nil
	}
	defer unix.Close(dfd)
	check := func() error {
		var st unix.Stat_t
		err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err != nil && err != unix.ENOENT {
			return w.exactFault("write", dfd, base, rel, err)
		}
		if err == nil {
			if f := w.regularFault("write", rel, &st); f != nil {
				return f
			}
		}
		exists := err == nil
		if a.IfMissing && exists || a.IfStamp != nil && (!exists || fileStamp(&st) != *a.IfStamp) {
			return faultf(proto.FaultChanged, "write", jail, jail, "%s changed since it was read: read it again", jail)
		}
		return nil
	}
	// The content is copied into the new file as it comes: a board of
	// megabytes is not held whole in the runner.
	old, stamp, err := w.replaceIn(dfd, base, rel, nil, writeOpts{check: check, sync: true, src: in, written: &res.Size})
	var pe *proto.Error
	if errors.As(err, &pe) {
		return proto.FileWriteResult{}, pe // over the limit: a broken request
	}
	if err != nil {
		res.Size = 0
		res.Fault = &w.systemError("write", resolved{asked: jail, rel: rel, jail: jail}, err).FileFault
		return res, nil
	}
	res.OldSize, res.Stamp = old, &stamp
	w.cleanStale(dfd, base)
	return res, nil
}

// cleanStale removes the temporary files of base's exact writes that a
// killed writer left in the directory dfd: regular files named like
// replaceIn's, older than staleTemp. The copies of a rewrite in place
// (".old") hold the last copy of a file's content, and stay.
func (w *workspace) cleanStale(dfd int, base string) {
	fd, err := unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	dir := os.NewFile(uintptr(fd), ".")
	defer dir.Close()
	names, err := dir.Readdirnames(maxScan)
	if err != nil && !errors.Is(err, io.EOF) {
		return
	}
	prefix := "." + base + ".warren-"
	now := time.Now()
	for _, name := range names {
		if !strings.HasPrefix(name, prefix) || strings.HasSuffix(name, ".old") {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if now.Sub(time.Unix(st.Mtim.Unix())) > staleTemp {
			_ = unix.Unlinkat(dfd, name, 0)
		}
	}
}
