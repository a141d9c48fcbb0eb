package client_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/warrenhq/warren/sandbox/runner"
	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// connTo serves the runner's operations on dir in this process over a
// socket pair, as a jail's runner serves them over its own.
func connTo(b *testing.B, dir string) *client.Conn {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = runner.NewServer(runner.FileOps(dir, "/workspace")).ServeFD(fds[1]) }()
	_ = syscall.SetNonblock(fds[0], true)
	c := client.New(os.NewFile(uintptr(fds[0]), "conn"))
	b.Cleanup(func() { c.Close() })
	if _, err := c.Hello(context.Background()); err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkPing is a request's fixed cost on both sides of a connection:
// frames, heads, hand-offs.
func BenchmarkPing(b *testing.B) {
	c := connTo(b, b.TempDir())
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Call(context.Background(), proto.OpPing, proto.PingArgs{}, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFileRead4K is read_file's request to the runner, for a file of
// 4 KB.
func BenchmarkFileRead4K(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "4k.txt"), []byte(strings.Repeat("abcdefghijklmno\n", 256)), 0o644); err != nil {
		b.Fatal(err)
	}
	c := connTo(b, dir)
	b.ReportAllocs()
	buf := make([]byte, 8<<10)
	for b.Loop() {
		st, err := c.Open(context.Background(), proto.OpFileRead, proto.FileReadArgs{Path: "4k.txt", Limit: 10 << 20}, nil)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			k, err := st.Read(buf[n:])
			n += k
			if err != nil {
				break
			}
		}
		var res proto.FileReadResult
		if err := st.Result(&res); err != nil || res.Size != 4096 || n != 4096 {
			b.Fatal(err, res, n)
		}
		st.Close()
	}
}
