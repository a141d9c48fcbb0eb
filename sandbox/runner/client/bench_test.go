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
	"github.com/warrenhq/warren/sandbox/runner/runnertest"
)

// connTo serves the runner's operations on dir in this process over two
// pipes, as a jail's runner serves them over its own.
func connTo(b *testing.B, dir string) *client.Conn {
	var toRunner, fromRunner [2]int
	if err := syscall.Pipe2(toRunner[:], syscall.O_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Pipe2(fromRunner[:], syscall.O_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	go func() { _ = runner.NewServer(runner.FileOps(dir, "/workspace")).ServeFDs(toRunner[0], fromRunner[1]) }()
	_ = syscall.SetNonblock(fromRunner[0], true)
	c := client.New(&runner.Pipes{R: os.NewFile(uintptr(fromRunner[0]), "from-runner"), W: os.NewFile(uintptr(toRunner[1]), "to-runner")})
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
		if n, res := runnertest.ReadFile(b, c, "4k.txt", buf); n != 4096 || res.Size != 4096 {
			b.Fatal(n, res)
		}
	}
}
