package runnertest

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// ReadFile reads the workspace's file at path through c, as read_file
// does (file.read, no limit but the protocol's), into buf: it returns how
// many bytes came and the runner's result. An error, or more than buf
// holds, fails tb.
func ReadFile(tb testing.TB, c *client.Conn, path string, buf []byte) (int, proto.FileReadResult) {
	tb.Helper()
	st, err := c.Open(context.Background(), proto.OpFileRead, proto.FileReadArgs{Path: path, Limit: proto.MaxFileLimit}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	n := 0
	for {
		if n == len(buf) {
			tb.Fatalf("%s: more than %d bytes", path, len(buf))
		}
		k, err := st.Read(buf[n:])
		n += k
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	var res proto.FileReadResult
	if err := st.Result(&res); err != nil {
		tb.Fatal(err)
	}
	return n, res
}
