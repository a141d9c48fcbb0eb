package tasks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// RunnerOptions name a board's file in a workspace served by a runner.
type RunnerOptions struct {
	// Conn returns the connection to a runner that serves the workspace
	// at /workspace (sandbox.RunnerJail.Runner), starting it when needed.
	Conn func(context.Context) (*client.Conn, error)
	// Workspace is the workspace's host directory and Path the board's
	// file inside it (as Options.Path): messages name host paths.
	Workspace, Path string
	// Close, when set, is called by the file's Close (it stops the jail).
	Close func() error
}

// RunnerFile is the BoardFile of a board in a workspace: the file's
// reads and writes are the runner's exact file operations (no link
// along the path, no hard-linked file, compare-and-write against the
// file's stamp; docs/runner-protocol.md), done inside a jail that sees
// nothing but the workspace. Everything the runner says is checked: it
// is inside a jail, and whatever runs there may have replaced it.
func RunnerFile(o RunnerOptions) (BoardFile, error) {
	ws, err := filepath.Abs(o.Workspace)
	if err != nil {
		return nil, err
	}
	p, err := filepath.Abs(o.Path)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(ws, p)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, invalidf("open board: %s is not inside %s", o.Path, o.Workspace)
	}
	return &runnerFile{conn: o.Conn, ws: ws, rel: filepath.ToSlash(rel), shown: p, close: o.Close}, nil
}

type runnerFile struct {
	conn  func(context.Context) (*client.Conn, error)
	ws    string // host directory of the workspace
	rel   string // the file, relative to it
	shown string // the file's host path
	close func() error
}

// callTimeout bounds one call: a runner that stops answering holds up a
// sync, not the board for ever. Reading the largest board takes
// milliseconds.
const callTimeout = 30 * time.Second

// mount is where the runner sees the workspace.
const mount = "/workspace"

func (r *runnerFile) Close() error {
	if r.close != nil {
		return r.close()
	}
	return nil
}

// call runs fn on the runner's connection, once more on a fresh one when
// the runner ended under it (killed, or its jail stopped): the jail is
// started again.
func (r *runnerFile) call(ctx context.Context, fn func(context.Context, *client.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	for i := 0; ; i++ {
		c, err := r.conn(ctx)
		if err != nil {
			return fmt.Errorf("the task board's runner: %w", err)
		}
		err = fn(ctx, c)
		if i == 0 && errors.Is(err, client.ErrGone) {
			continue
		}
		return err
	}
}

// liar is the error of a reply that breaks the protocol's promises.
func (r *runnerFile) liar(what string) error {
	return fmt.Errorf("the task board's runner for %s sent %s: something in the workspace's jails may have replaced it; try again", r.ws, what)
}

// hostPath turns a path the runner names (under /workspace) into the
// host's; one outside the file's own path is a lie.
func (r *runnerFile) hostPath(jail string) (string, bool) {
	rel, ok := strings.CutPrefix(jail, mount+"/")
	if !ok || rel != path.Clean(rel) || (rel != r.rel && !strings.HasPrefix(r.rel, rel+"/")) {
		return "", false
	}
	return filepath.Join(r.ws, filepath.FromSlash(rel)), true
}

// fault turns a refusal of the runner into the board's error; what the
// protocol does not promise is a lie.
func (r *runnerFile) fault(f *proto.FileFault, stamp *proto.FileStamp) error {
	where, ok := r.hostPath(f.Jail)
	if !ok && f.Kind != proto.FaultSystem && f.Kind != proto.FaultPermission {
		return r.liar("a fault about another path")
	}
	if !ok {
		where = r.shown
	}
	switch f.Kind {
	case proto.FaultChanged:
		return errFileChanged
	case proto.FaultLink:
		return linkError(where, where != r.shown)
	case proto.FaultNotDir, proto.FaultNotDirPath:
		return notDirError(where)
	case proto.FaultNotRegular:
		return notRegularError(where, typeWords(f.Type))
	case proto.FaultHardLinks:
		if stamp == nil || stamp.Links < 2 {
			return r.liar("a hard-link fault without the links")
		}
		return hardLinksError(where, stamp.Links)
	case proto.FaultTooBig:
		if f.Size <= MaxFileSize && f.Size != 0 {
			return r.liar("a size under the limit as too big")
		}
		return tooBigError(where, f.Size)
	case proto.FaultPermission:
		return fmt.Errorf("%s: permission denied to the jail's user: give it access to the workspace", where)
	case proto.FaultSystem:
		return fmt.Errorf("%s: %s", where, proto.Cut(f.Message, 300))
	}
	return r.liar("a fault of kind " + proto.Cut(f.Kind, 40))
}

// typeWords names a FileType as the board's messages do.
func typeWords(t string) string {
	switch t {
	case proto.TypeFIFO:
		return "a FIFO"
	case proto.TypeDir:
		return "a directory"
	case proto.TypeSocket:
		return "a socket"
	case proto.TypeCharDev, proto.TypeBlockDev:
		return "a device"
	case proto.TypeSymlink:
		return "a symbolic link"
	}
	return "not a file"
}

// stamp checks a stamp the runner sent.
func (r *runnerFile) stamp(s *proto.FileStamp, size int64) (FileStamp, error) {
	if s == nil || s.Size < 0 || s.Size > MaxFileSize || (size >= 0 && s.Size != size) {
		return FileStamp{}, r.liar("no stamp, or one that does not fit the file")
	}
	return FileStamp{Exists: true, Dev: s.Dev, Ino: s.Ino, Size: s.Size, Mtime: s.Mtime, Ctime: s.Ctime}, nil
}

// Stat implements BoardFile.
func (r *runnerFile) Stat(ctx context.Context) (FileStamp, error) {
	var res proto.FileStatResult
	err := r.call(ctx, func(ctx context.Context, c *client.Conn) error {
		return c.Call(ctx, proto.OpFileStat, proto.FileStatArgs{Path: r.rel, Exact: true}, nil, &res)
	})
	switch {
	case err != nil:
		return FileStamp{}, err
	case res.Fault != nil:
		return FileStamp{}, r.fault(res.Fault, res.Stamp)
	case !res.Exists:
		return FileStamp{}, nil
	}
	return r.stamp(res.Stamp, -1)
}

// Read implements BoardFile.
func (r *runnerFile) Read(ctx context.Context) ([]byte, FileStamp, error) {
	var res proto.FileReadResult
	var buf bytes.Buffer
	err := r.call(ctx, func(ctx context.Context, c *client.Conn) error {
		buf.Reset()
		st, err := c.Open(ctx, proto.OpFileRead, proto.FileReadArgs{Path: r.rel, Limit: MaxFileSize, Exact: true}, nil)
		if err != nil {
			return err
		}
		defer st.Close()
		// One byte past the limit tells a liar from an honest runner.
		if _, err := buf.ReadFrom(io.LimitReader(st, MaxFileSize+1)); err != nil {
			return err
		}
		return st.Result(&res)
	})
	switch {
	case err != nil:
		return nil, FileStamp{}, err
	case buf.Len() > MaxFileSize || res.Size != int64(buf.Len()):
		return nil, FileStamp{}, r.liar("more or less of the file than it said")
	case res.Fault != nil && res.Fault.Kind == proto.FaultNotFound:
		return nil, FileStamp{}, nil
	case res.Fault != nil:
		return nil, FileStamp{}, r.fault(res.Fault, res.Stamp)
	}
	// The stamp is the file's before it was read: an editor that was
	// writing it meanwhile leaves another size, and a new stamp the next
	// look sees.
	s, err := r.stamp(res.Stamp, -1)
	return buf.Bytes(), s, err
}

// Write implements BoardFile.
func (r *runnerFile) Write(ctx context.Context, data []byte, was FileStamp) (FileStamp, error) {
	args := proto.FileWriteArgs{Path: r.rel, MaxGrow: -1, Exact: true, IfMissing: !was.Exists}
	if was.Exists {
		args.IfStamp = &proto.FileStamp{Dev: was.Dev, Ino: was.Ino, Size: was.Size, Mtime: was.Mtime, Ctime: was.Ctime, Links: 1}
	}
	var res proto.FileWriteResult
	err := r.call(ctx, func(ctx context.Context, c *client.Conn) error {
		return c.Call(ctx, proto.OpFileWrite, args, data, &res)
	})
	switch {
	case err != nil:
		return FileStamp{}, err
	case res.Fault != nil:
		return FileStamp{}, r.fault(res.Fault, res.Stamp)
	case res.Size != int64(len(data)):
		return FileStamp{}, r.liar("a size that is not what was written")
	}
	return r.stamp(res.Stamp, -1)
}
