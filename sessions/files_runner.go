package sessions

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
	"github.com/warrenhq/warren/sessions/errs"
)

// RunnerFiles is Files done by the runner at the other end of c (the
// jail's, sandbox.Shell.Runner). Everything the runner says is checked
// before it is used: a runner is inside the jail, and whatever runs
// there can replace it. Sizes stay within the limits asked, paths within
// the workspace, counts within what the request allows, and a fault must
// be one the protocol knows; anything else is an internal error that
// names the runner.
func RunnerFiles(c *client.Conn) Files { return runnerFiles{c} }

type runnerFiles struct{ c *client.Conn }

// fileCallTimeout bounds one file operation: a runner that stops
// answering holds up one call, not a tool forever. Reading the largest
// file the tools allow takes milliseconds.
const fileCallTimeout = 2 * time.Minute

// maxPathBytes bounds a path the runner names (PATH_MAX, and a little
// for the mount point).
const maxPathBytes = 4096 + 64

// errLiar is what a reply that breaks the protocol's promises fails with.
func errLiar(what string) error {
	return errs.New(errs.Internal, "the session's runner sent "+what+": a command in the session may have replaced it; stop the session's processes "+
		"(shell_kill) and retry")
}

func (r runnerFiles) Read(ctx context.Context, path string, limit int64) (FileContent, error) {
	ctx, cancel := context.WithTimeout(ctx, fileCallTimeout)
	defer cancel()
	st, err := r.c.Open(ctx, proto.OpFileRead, proto.FileReadArgs{Path: path, Limit: limit}, nil)
	if err != nil {
		return FileContent{}, err
	}
	defer st.Close()
	// One byte past the limit tells a liar from an honest runner, which
	// never sends more than asked; more is never read.
	data, err := readOutput(st, limit+1)
	if err != nil {
		return FileContent{}, err
	}
	if int64(len(data)) > limit {
		return FileContent{}, errLiar("more of the file than the limit asked")
	}
	var res proto.FileReadResult
	if err := st.Result(&res); err != nil {
		return FileContent{}, err
	}
	if res.Fault != nil {
		return FileContent{}, fileFault(res.Fault, limit)
	}
	if res.Size != int64(len(data)) {
		return FileContent{}, errLiar("a size that is not what it sent")
	}
	if err := checkJail(res.Jail); err != nil {
		return FileContent{}, err
	}
	return FileContent{Jail: res.Jail, Data: data}, nil
}

// readOutput reads st's output up to max bytes. The first piece (the
// whole of a small file, usually) is copied into a slice of its own size;
// growing a buffer from 512 bytes, as bytes.Buffer does, copied a 4 KB
// file four times.
func readOutput(st *client.Stream, max int64) ([]byte, error) {
	var out []byte
	for int64(len(out)) < max {
		b, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		b = b[:min(int64(len(b)), max-int64(len(out)))]
		if out == nil {
			out = make([]byte, 0, len(b))
		}
		out = append(out, b...)
	}
	return out, nil
}

func (r runnerFiles) Write(ctx context.Context, path string, data []byte, opts WriteOptions) (FileWritten, error) {
	ctx, cancel := context.WithTimeout(ctx, fileCallTimeout)
	defer cancel()
	var res proto.FileWriteResult
	args := proto.FileWriteArgs{Path: path, Append: opts.Append, Limit: opts.Limit, MaxGrow: opts.MaxGrow}
	if err := r.c.Call(ctx, proto.OpFileWrite, args, data, &res); err != nil {
		return FileWritten{}, err
	}
	w, err := written(res, opts.Limit, opts.MaxGrow)
	if err != nil {
		return FileWritten{}, err
	}
	n := int64(len(data))
	if (!opts.Append && w.Size != n) || (opts.Append && w.Size != w.OldSize+n) {
		return FileWritten{}, errLiar("a size that is not what was written")
	}
	return w, nil
}

func (r runnerFiles) Edit(ctx context.Context, path string, e EditOptions) (FileEdited, error) {
	if e.Old == "" {
		return FileEdited{}, errs.New(errs.Invalid, "the text to replace is empty")
	}
	ctx, cancel := context.WithTimeout(ctx, fileCallTimeout)
	defer cancel()
	var res proto.FileEditResult
	args := proto.FileEditArgs{Path: path, OldLen: len(e.Old), All: e.All, Limit: e.Limit, MaxGrow: e.MaxGrow}
	if err := r.c.Call(ctx, proto.OpFileEdit, args, []byte(e.Old+e.New), &res); err != nil {
		return FileEdited{}, err
	}
	w, err := written(res.FileWriteResult, e.Limit, e.MaxGrow)
	if err != nil {
		return FileEdited{}, err
	}
	ed := FileEdited{FileWritten: w, Found: res.Found, Replaced: res.Replaced}
	switch {
	case res.Found < 0 || res.Replaced < 0 || res.Replaced > res.Found || res.OldSize > e.Limit ||
		int64(res.Found) > res.OldSize/int64(len(e.Old)):
		return FileEdited{}, errLiar("counts that do not fit the file")
	case res.Replaced == 0 && (res.Found == 1 || (res.Found > 1 && e.All)):
		return FileEdited{}, errLiar("an edit it did not make")
	case res.Replaced > 0 && res.Replaced != 1 && res.Replaced != res.Found,
		res.Replaced > 1 && !e.All,
		res.Replaced > 0 && w.Size != w.OldSize+int64(res.Replaced)*(int64(len(e.New))-int64(len(e.Old))):
		return FileEdited{}, errLiar("an edit that is not the one asked")
	}
	return ed, nil
}

func (r runnerFiles) Stat(ctx context.Context, path string) (FileStat, error) {
	ctx, cancel := context.WithTimeout(ctx, fileCallTimeout)
	defer cancel()
	var res proto.FileStatResult
	if err := r.c.Call(ctx, proto.OpFileStat, proto.FileStatArgs{Path: path}, nil, &res); err != nil {
		return FileStat{}, err
	}
	if res.Fault != nil {
		return FileStat{}, fileFault(res.Fault, 0)
	}
	if err := checkJail(res.Jail); err != nil {
		return FileStat{}, err
	}
	st := FileStat{Jail: res.Jail, Exists: res.Exists, Size: res.Size}
	if res.Exists {
		t, ok := fileTypes[res.Type]
		if !ok || res.Size < 0 || (t != 0 && res.Size != 0) {
			return FileStat{}, errLiar("an entry of no known type")
		}
		st.Type = t
	}
	return st, nil
}

// written checks what a write or edit says it did.
func written(res proto.FileWriteResult, limit, maxGrow int64) (FileWritten, error) {
	if res.Fault != nil {
		return FileWritten{}, fileFault(res.Fault, limit)
	}
	if err := checkJail(res.Jail); err != nil {
		return FileWritten{}, err
	}
	if res.OldSize < 0 || res.Size < 0 || res.Size > 2*proto.MaxFileLimit {
		return FileWritten{}, errLiar("a negative or impossible size")
	}
	grow := res.Size - res.OldSize
	if maxGrow >= 0 && (res.Refused != (grow > maxGrow)) {
		return FileWritten{}, errLiar("a refusal that does not match the growth allowed")
	}
	if maxGrow < 0 && res.Refused {
		return FileWritten{}, errLiar("a refusal where no bound was asked")
	}
	return FileWritten{Jail: res.Jail, OldSize: res.OldSize, Size: res.Size, Refused: res.Refused}, nil
}

// checkJail checks a path as the jail sees it: the workspace or under it,
// of a bounded length, valid UTF-8 (a name that is not comes back with
// U+FFFD for its bad bytes), with no NUL.
func checkJail(p string) error {
	if len(p) > maxPathBytes || !utf8.ValidString(p) || strings.IndexByte(p, 0) >= 0 ||
		(p != sandbox.MountPoint && !strings.HasPrefix(p, sandbox.MountPoint+"/")) {
		return errLiar("a path outside the workspace")
	}
	return nil
}

// faultErrs are the errors each kind of fault matches.
var faultErrs = map[string]error{
	proto.FaultBadPath:      ErrBadPath,
	proto.FaultOutside:      ErrOutside,
	proto.FaultTooManyLinks: ErrTooManyLinks,
	proto.FaultNotFound:     fs.ErrNotExist,
	proto.FaultNotRegular:   ErrNotRegular,
	proto.FaultNotDir:       ErrNotDir,
	proto.FaultNotDirPath:   syscall.ENOTDIR,
	proto.FaultTooBig:       ErrTooBig,
	proto.FaultChanged:      ErrChanged,
	proto.FaultPermission:   fs.ErrPermission,
	proto.FaultSystem:       errors.New("the system refused"),
}

// fileTypes are the types of entries, by their protocol names.
var fileTypes = map[string]fs.FileMode{
	proto.TypeFile:      0,
	proto.TypeDir:       fs.ModeDir,
	proto.TypeSymlink:   fs.ModeSymlink,
	proto.TypeFIFO:      fs.ModeNamedPipe,
	proto.TypeCharDev:   fs.ModeDevice | fs.ModeCharDevice,
	proto.TypeBlockDev:  fs.ModeDevice,
	proto.TypeSocket:    fs.ModeSocket,
	proto.TypeIrregular: fs.ModeIrregular,
}

var faultOps = map[string]bool{"resolve": true, "read": true, "write": true, "mkdir": true}

// fileFault turns a runner's fault into a FileError, checked and bounded;
// limit is the one the request asked for.
func fileFault(f *proto.FileFault, limit int64) error {
	err, ok := faultErrs[f.Kind]
	t, typed := fileTypes[f.Type]
	switch {
	case !ok, !faultOps[f.Op], f.Type != "" && !typed, f.Message == "":
		return errLiar("a refusal the protocol does not know")
	case f.Jail != "" && checkJail(f.Jail) != nil:
		return errLiar("a path outside the workspace")
	case f.Kind == proto.FaultTooBig && (f.Limit != limit || (f.Size != 0 && f.Size <= limit)):
		return errLiar("a size over a limit that was not asked")
	case f.Kind != proto.FaultTooBig && (f.Size != 0 || f.Limit != 0):
		return errLiar("sizes with a refusal that has none")
	}
	return &FileError{Op: f.Op, Path: proto.Cut(f.Path, maxPathBytes), Jail: f.Jail, Type: t, Size: f.Size, Limit: f.Limit,
		Err: err, Message: proto.Cut(f.Message, proto.MaxMessage)}
}
