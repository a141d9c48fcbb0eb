package tasks

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/warrenhq/warren/sandbox/runner"
	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// lyingRunner serves the file operations with the replies given, whatever
// is asked: a runner that something in a jail replaced.
func lyingRunner(t *testing.T, stat proto.FileStatResult, read proto.FileReadResult, out string, write proto.FileWriteResult) BoardFile {
	t.Helper()
	ops := runner.Ops()
	ops[proto.OpFileStat] = func(*runner.Call) (any, error) { return stat, nil }
	ops[proto.OpFileRead] = func(c *runner.Call) (any, error) {
		_, err := c.Out.Write([]byte(out))
		return read, err
	}
	ops[proto.OpFileWrite] = func(*runner.Call) (any, error) { return write, nil }
	a, b := net.Pipe()
	go func() { _ = runner.NewServer(ops).Serve(b); b.Close() }()
	c := client.New(a)
	t.Cleanup(func() { c.Close() })
	f, err := RunnerFile(RunnerOptions{Conn: func(context.Context) (*client.Conn, error) { return c, nil },
		Workspace: "/srv/ws", Path: "/srv/ws/docs/TASKS.md"})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The board believes nothing its runner says that the protocol does not
// promise: a fault about another file, a size that is not what was sent
// or written, a stamp missing or out of bounds. Each is an error that
// names the runner; none is taken for the file.
func TestBoardDoesNotBelieveALyingRunner(t *testing.T) {
	ctx := context.Background()
	stamp := &proto.FileStamp{Dev: 1, Ino: 2, Size: 5, Links: 1}
	outside := &proto.FileFault{Kind: proto.FaultLink, Jail: "/workspace/../etc/shadow", Message: "x"}
	other := &proto.FileFault{Kind: proto.FaultNotRegular, Jail: "/workspace/src/main.go", Message: "x"}
	cases := []struct {
		name string
		f    BoardFile
		call func(BoardFile) error
	}{
		{"a fault about a path outside", lyingRunner(t, proto.FileStatResult{Fault: outside}, proto.FileReadResult{}, "", proto.FileWriteResult{}),
			func(f BoardFile) error { _, err := f.Stat(ctx); return err }},
		{"a fault about another file", lyingRunner(t, proto.FileStatResult{}, proto.FileReadResult{Fault: other}, "", proto.FileWriteResult{}),
			func(f BoardFile) error { _, _, err := f.Read(ctx); return err }},
		{"a size that is not what it sent", lyingRunner(t, proto.FileStatResult{}, proto.FileReadResult{Size: 3, Stamp: stamp}, "- [ ] T-1 secret\n", proto.FileWriteResult{}),
			func(f BoardFile) error { _, _, err := f.Read(ctx); return err }},
		{"no stamp", lyingRunner(t, proto.FileStatResult{Exists: true, Type: proto.TypeFile}, proto.FileReadResult{}, "", proto.FileWriteResult{}),
			func(f BoardFile) error { _, err := f.Stat(ctx); return err }},
		{"a stamp over the limit", lyingRunner(t, proto.FileStatResult{Exists: true, Stamp: &proto.FileStamp{Size: MaxFileSize + 1}}, proto.FileReadResult{}, "", proto.FileWriteResult{}),
			func(f BoardFile) error { _, err := f.Stat(ctx); return err }},
		{"a small file too big", lyingRunner(t, proto.FileStatResult{}, proto.FileReadResult{Fault: &proto.FileFault{Kind: proto.FaultTooBig, Jail: "/workspace/docs/TASKS.md", Size: 10}}, "", proto.FileWriteResult{}),
			func(f BoardFile) error { _, _, err := f.Read(ctx); return err }},
		{"a write of another size", lyingRunner(t, proto.FileStatResult{}, proto.FileReadResult{}, "", proto.FileWriteResult{Size: 1, Stamp: stamp}),
			func(f BoardFile) error { _, err := f.Write(ctx, []byte("hello"), FileStamp{}); return err }},
		{"an unknown fault", lyingRunner(t, proto.FileStatResult{}, proto.FileReadResult{}, "", proto.FileWriteResult{Fault: &proto.FileFault{Kind: "rm -rf", Jail: "/workspace/docs/TASKS.md"}}),
			func(f BoardFile) error { _, err := f.Write(ctx, []byte("hello"), FileStamp{}); return err }},
	}
	for _, tc := range cases {
		err := tc.call(tc.f)
		if err == nil || !strings.Contains(err.Error(), "the task board's runner for /srv/ws sent") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
