package mcp

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/warrenhq/warren/sandbox/runner"
	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sessions"
)

func TestSliceLines(t *testing.T) {
	s := "1\n2\n3\n4"
	for _, tc := range []struct {
		offset, limit int
		want          string
		truncated     bool
	}{
		{0, 0, s, false},
		{2, 2, "2\n3\n", true},
		{4, 1, "4", false},
		{9, 1, "", false},
	} {
		got := sliceLines(s, tc.offset, tc.limit)
		if got.Content != tc.want || got.Truncated != tc.truncated || got.TotalLines != 4 {
			t.Errorf("sliceLines(%d, %d) = %+v", tc.offset, tc.limit, got)
		}
	}
	big := strings.Repeat(strings.Repeat("x", 1000)+"\n", 1000)
	if got := sliceLines(big, 1, 1000); len(got.Content) > maxReadOut || !got.Truncated {
		t.Errorf("byte cap not applied: %d bytes, truncated %v", len(got.Content), got.Truncated)
	}
}

// The file tools' errors say what to do next with the tools, in the words
// they had when the file layer lived in this package.
func TestFileErrorAdvice(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		os.Mkdir(filepath.Join(dir, "sub"), 0o755),
		os.WriteFile(filepath.Join(dir, "big"), make([]byte, 100), 0o644),
		os.Symlink("loop", filepath.Join(dir, "loop")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	f := filesOver(t, dir)
	ctx := context.Background()
	read := func(path string) string {
		_, err := f.Read(ctx, path, 10)
		return toolMessage(fileError("read_file", err))
	}
	writeDir := func() string {
		_, err := f.Write(ctx, "sub", nil, sessions.WriteOptions{MaxGrow: -1})
		return toolMessage(fileError("write_file", err))
	}
	for _, tc := range []struct{ got, want string }{
		{read("missing.txt"), "missing.txt does not exist: check the path (it is relative to /workspace), or create it with write_file"},
		{read("sub"), "sub is a directory: list it with shell_exec 'ls -la /workspace/sub'"},
		{read("pipe"), "pipe is not a regular file (p---------): inspect it with shell_exec, e.g. 'ls -l /workspace/pipe'"},
		{read("big"), "big is 100 bytes, over read_file's limit of 10: use shell_exec (head, sed -n, grep) instead"},
		{read("loop"), "/workspace/loop: too many symbolic links (a loop?): look at them with shell_exec 'ls -l'"},
		{read("/etc/passwd"), `path "/etc/passwd" is outside the workspace: use a path relative to the workspace or under /workspace`},
		{writeDir(), "/workspace/sub is a directory, not a file"},
	} {
		if tc.got != tc.want {
			t.Errorf("got  %q\nwant %q", tc.got, tc.want)
		}
	}
}

// filesOver returns the files of dir as a jail's runner serves them (seen
// at /workspace), over a pipe.
func filesOver(t *testing.T, dir string) sessions.Files {
	t.Helper()
	a, b := net.Pipe()
	go func() { _ = runner.NewServer(runner.FileOps(dir, "/workspace")).Serve(b); b.Close() }()
	c := client.New(a)
	t.Cleanup(func() { c.Close() })
	return sessions.RunnerFiles(c)
}
