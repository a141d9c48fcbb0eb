package runner

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// MountPoint is where a jail sees its workspace, and where the runner
// finds it.
const MountPoint = "/workspace"

// jailWorkspace is the workspace of the jail this runner runs in.
var jailWorkspace = &workspace{dir: MountPoint, mount: MountPoint}

func init() {
	for op, h := range fileOps(jailWorkspace) {
		register(op, h)
	}
}

// fileOps returns the file operations on w.
func fileOps(w *workspace) map[string]Handler {
	return map[string]Handler{
		proto.OpFileRead:  w.read,
		proto.OpFileWrite: w.write,
		proto.OpFileEdit:  w.edit,
		proto.OpFileStat:  w.stat,
	}
}

// FileOps returns the file operations on the workspace found at dir, which
// the jail sees at mount: for tests of the protocol outside a jail.
func FileOps(dir, mount string) map[string]Handler {
	ops := Ops()
	for op, h := range fileOps(&workspace{dir: dir, mount: mount}) {
		ops[op] = h
	}
	return ops
}

// decodeFileArgs decodes a file operation's arguments into a and refuses
// the limit they carry (*limit, a field of a) when the server would never
// ask for it.
func decodeFileArgs(c *Call, a any, limit *int64) error {
	if err := c.DecodeArgs(a); err != nil {
		return err
	}
	if n := *limit; n < 0 || n > proto.MaxFileLimit {
		return proto.Errorf(proto.CodeInvalid, "limit %d is outside 0..%d", n, proto.MaxFileLimit)
	}
	return nil
}

func (w *workspace) read(c *Call) (any, error) {
	var a proto.FileReadArgs
	if err := decodeFileArgs(c, &a, &a.Limit); err != nil {
		return nil, err
	}
	if a.Exact {
		return w.readExact(a, c.Out), nil
	}
	if res, ok := w.readFast(a.Path, a.Limit, c.Out); ok {
		return res, nil
	}
	root, err := w.open()
	if err != nil {
		return nil, err
	}
	p, f := w.resolve(root, a.Path)
	if f != nil {
		return proto.FileReadResult{Fault: &f.FileFault}, nil
	}
	n, f := w.readTo(root, p, a.Limit, c.Out)
	if f != nil {
		return proto.FileReadResult{Jail: p.jail, Fault: &f.FileFault}, nil
	}
	return proto.FileReadResult{Jail: p.jail, Size: n}, nil
}

// readTo copies the regular file at p, of at most limit bytes, to out.
// Anything else is refused before a byte is read: a FIFO would block the
// call forever (it is opened non-blocking, then checked), a device or a
// huge (even sparse) file would flood the server. A file that grows past
// limit while it is read is refused too, after limit bytes were sent.
func (w *workspace) readTo(root *os.Root, p resolved, limit int64, out io.Writer) (int64, *fault) {
	fh, err := root.OpenFile(p.rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, w.systemError("read", p, err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return 0, w.systemError("read", p, err)
	}
	switch {
	case fi.IsDir():
		f := faultf(proto.FaultNotRegular, "read", p.asked, p.jail, "%s is a directory", p.asked)
		f.Type = proto.TypeDir
		return 0, f
	case !fi.Mode().IsRegular():
		f := faultf(proto.FaultNotRegular, "read", p.asked, p.jail, "%s is not a regular file (%s)", p.asked, fi.Mode().Type())
		f.Type = typeName(fi.Mode())
		return 0, f
	case fi.Size() > limit:
		f := faultf(proto.FaultTooBig, "read", p.asked, p.jail, "%s is %d bytes, over the limit of %d", p.asked, fi.Size(), limit)
		f.Size, f.Limit = fi.Size(), limit
		return 0, f
	}
	return w.send(fh, fi.Size(), p, limit, out)
}

// send copies the regular file r of size bytes (when it was opened) to
// out. At most limit bytes are sent, whatever the file does meanwhile:
// the server takes a runner that sends more for a liar. One more byte,
// kept here, says whether the file grew past the limit.
func (w *workspace) send(r io.Reader, size int64, p resolved, limit int64, out io.Writer) (int64, *fault) {
	// Room for the file's size, not io.Copy's 32 KiB: most files the tools
	// read are small, and the runner's memory is paid per session. A
	// stream (or a bytes.Buffer) reads the file into its own memory.
	n0 := int(min(limit, size, 256<<10)) + 1
	var n int64
	var err error
	if g, ok := out.(interface {
		io.ReaderFrom
		Grow(int)
	}); ok {
		g.Grow(n0)
		n, err = g.ReadFrom(io.LimitReader(r, limit))
	} else {
		n, err = io.CopyBuffer(out, io.LimitReader(r, limit), make([]byte, n0))
	}
	if err == nil && n == limit {
		var one [1]byte
		if m, _ := r.Read(one[:]); m > 0 {
			n++
		}
	}
	if err != nil {
		var pe *proto.Error
		if errors.As(err, &pe) {
			return n, faultf(proto.FaultSystem, "read", p.asked, p.jail, "%s: %s", p.asked, pe.Message)
		}
		return n, w.systemError("read", p, err)
	}
	if n > limit {
		f := faultf(proto.FaultTooBig, "read", p.asked, p.jail, "%s grew past the limit of %d bytes while it was read", p.asked, limit)
		f.Limit = limit
		return n, f
	}
	return n, nil
}

// readAll reads the regular file at p, of at most limit bytes.
func (w *workspace) readAll(root *os.Root, p resolved, limit int64) ([]byte, *fault) {
	var b bytes.Buffer
	_, f := w.readTo(root, p, limit, &b)
	return b.Bytes(), f
}

// readInput reads a request's whole input, bounded.
func readInput(c *Call) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(c.In, proto.MaxFileLimit+1))
	if err != nil {
		return nil, err
	}
	if len(b) > proto.MaxFileLimit {
		return nil, proto.Errorf(proto.CodeLimit, "the input is over %d bytes", proto.MaxFileLimit)
	}
	return b, nil
}

func (w *workspace) write(c *Call) (any, error) {
	var a proto.FileWriteArgs
	if err := decodeFileArgs(c, &a, &a.Limit); err != nil {
		return nil, err
	}
	if a.Exact {
		return w.writeExact(a, c.In)
	}
	data, err := readInput(c)
	if err != nil {
		return nil, err
	}
	root, err := w.open()
	if err != nil {
		return nil, err
	}
	p, f := w.resolve(root, a.Path)
	if f != nil {
		return proto.FileWriteResult{Fault: &f.FileFault}, nil
	}
	if a.Append {
		old, f := w.readAll(root, p, a.Limit)
		if f != nil && f.Kind != proto.FaultNotFound {
			return proto.FileWriteResult{Jail: p.jail, Fault: &f.FileFault}, nil
		}
		return w.replace(root, p, append(old, data...), a.MaxGrow, int64(len(old))), nil
	}
	return w.replace(root, p, data, a.MaxGrow, -1), nil
}

// replace writes data over the file at p unless it would grow it by more
// than maxGrow (when not negative). The growth is from base, the size of
// the content an append or an edit read, or (base negative) from the
// size of the file replaced: the result's OldSize is that size, so that
// Size - OldSize is always the growth that was judged.
func (w *workspace) replace(root *os.Root, p resolved, data []byte, maxGrow, base int64) proto.FileWriteResult {
	res := proto.FileWriteResult{Jail: p.jail, Size: int64(len(data)), OldSize: base}
	old, err := w.writeAtomic(root, p.rel, data, func(oldSize int64) bool {
		if res.OldSize < 0 {
			res.OldSize = oldSize
		}
		return maxGrow < 0 || res.Size-res.OldSize <= maxGrow
	})
	if res.OldSize < 0 {
		res.OldSize = old
	}
	switch {
	case errors.Is(err, errOverGrowth):
		res.Refused = true
	case err != nil:
		res.OldSize, res.Size = 0, 0
		res.Fault = &w.systemError("write", p, err).FileFault
	}
	return res
}

func (w *workspace) edit(c *Call) (any, error) {
	var a proto.FileEditArgs
	if err := decodeFileArgs(c, &a, &a.Limit); err != nil {
		return nil, err
	}
	in, err := readInput(c)
	if err != nil {
		return nil, err
	}
	if a.OldLen <= 0 || a.OldLen > len(in) {
		return nil, proto.Errorf(proto.CodeInvalid, "old_len %d does not fit the input of %d bytes", a.OldLen, len(in))
	}
	old, repl := in[:a.OldLen], in[a.OldLen:]
	root, err := w.open()
	if err != nil {
		return nil, err
	}
	var res proto.FileEditResult
	p, f := w.resolve(root, a.Path)
	if f != nil {
		res.Fault = &f.FileFault
		return res, nil
	}
	res.Jail = p.jail
	data, f := w.readAll(root, p, a.Limit)
	if f != nil {
		res.Fault = &f.FileFault
		return res, nil
	}
	res.Found = bytes.Count(data, old)
	if res.Found == 0 || (res.Found > 1 && !a.All) {
		res.OldSize, res.Size = int64(len(data)), int64(len(data))
		return res, nil
	}
	res.Replaced = res.Found
	if !a.All {
		res.Replaced = 1
	}
	res.FileWriteResult = w.replace(root, p, bytes.Replace(data, old, repl, res.Replaced), a.MaxGrow, int64(len(data)))
	return res, nil
}

func (w *workspace) stat(c *Call) (any, error) {
	var a proto.FileStatArgs
	if err := c.DecodeArgs(&a); err != nil {
		return nil, err
	}
	if a.Exact {
		return w.statExact(a.Path), nil
	}
	root, err := w.open()
	if err != nil {
		return nil, err
	}
	p, f := w.resolve(root, a.Path)
	if f != nil {
		return proto.FileStatResult{Fault: &f.FileFault}, nil
	}
	res := proto.FileStatResult{Jail: p.jail}
	fi, err := root.Lstat(p.rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return res, nil
	case err != nil:
		res.Fault = &w.systemError("resolve", p, err).FileFault
		return res, nil
	}
	res.Exists, res.Type = true, typeName(fi.Mode())
	if fi.Mode().IsRegular() {
		res.Size = fi.Size()
	}
	return res, nil
}
