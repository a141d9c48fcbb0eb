package runner

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// filesPair serves the file operations on dir, seen at /workspace, and
// returns a client of them.
func filesPair(t *testing.T, dir string) *client.Conn {
	t.Helper()
	return pair(t, FileOps(dir, "/workspace"))
}

func readVia(t *testing.T, c *client.Conn, path string, limit int64) ([]byte, proto.FileReadResult) {
	t.Helper()
	st, err := c.Open(context.Background(), proto.OpFileRead, proto.FileReadArgs{Path: path, Limit: limit}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := io.ReadAll(st)
	if err != nil {
		t.Fatal(err)
	}
	var res proto.FileReadResult
	if err := st.Result(&res); err != nil {
		t.Fatal(err)
	}
	if res.Fault == nil && int64(len(b)) != res.Size {
		t.Fatalf("%s: %d bytes, the result says %d", path, len(b), res.Size)
	}
	if int64(len(b)) > limit {
		t.Fatalf("%s: %d bytes sent, over the limit of %d", path, len(b), limit)
	}
	return b, res
}

// A file of several frames comes whole; one over the limit is refused
// before a byte is sent.
func TestFileReadLargeAndOverTheLimit(t *testing.T) {
	dir := t.TempDir()
	large := strings.Repeat("L", 3<<20)
	if err := os.WriteFile(filepath.Join(dir, "large"), []byte(large), 0o644); err != nil {
		t.Fatal(err)
	}
	c := filesPair(t, dir)
	if b, res := readVia(t, c, "large", 4<<20); string(b) != large || res.Fault != nil {
		t.Errorf("large: %d bytes, %+v", len(b), res.Fault)
	}
	if b, res := readVia(t, c, "large", 3<<20-1); len(b) != 0 || res.Fault == nil || res.Fault.Kind != proto.FaultTooBig {
		t.Errorf("large over the limit: %d bytes, %+v", len(b), res.Fault)
	}
}

func writeVia(t *testing.T, c *client.Conn, a proto.FileWriteArgs, data string) proto.FileWriteResult {
	t.Helper()
	var res proto.FileWriteResult
	if err := c.Call(context.Background(), proto.OpFileWrite, a, []byte(data), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestFileResolveFollowsLinksOnlyWithinTheWorkspace(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "real.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"link":     "real.txt",
		"abs":      "/workspace/real.txt",
		"chain":    "link",
		"dirlink":  "sub",
		"absdir":   "/workspace/sub",
		"dangling": "new/made.txt",
		"rootdots": "/../workspace/./real.txt",
		"viadir":   "absdir/../real.txt", // .. of the link's target, as the kernel does
		"wsroot":   "/workspace",
		"out":      "/etc/passwd",
		"up":       "../x",
		"upup":     "sub/../../x",
		"absup":    "/workspace/../etc/passwd",
		"tmp":      "/tmp/x",
		"loop":     "loop",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	c := filesPair(t, dir)
	for _, tc := range []struct {
		in, want, bad, kind string
	}{
		{in: "real.txt", want: "/workspace/real.txt"},
		{in: ".", want: "/workspace"},
		{in: "/workspace/x/y", want: "/workspace/x/y"},
		{in: "./src/../b.go", want: "/workspace/b.go"},
		{in: "link", want: "/workspace/real.txt"},
		{in: "abs", want: "/workspace/real.txt"},
		{in: "chain", want: "/workspace/real.txt"},
		{in: "dirlink/x", want: "/workspace/sub/x"},
		{in: "absdir/x", want: "/workspace/sub/x"},
		{in: "dangling", want: "/workspace/new/made.txt"},
		{in: "missing/x", want: "/workspace/missing/x"},
		{in: "rootdots", want: "/workspace/real.txt"},
		{in: "viadir", want: "/workspace/real.txt"},
		{in: "wsroot", want: "/workspace"},
		{in: "wsroot/link", want: "/workspace/real.txt"},
		{in: "out", kind: proto.FaultOutside, bad: "/workspace/out is a symbolic link to /etc/passwd, outside the workspace"},
		{in: "up", kind: proto.FaultOutside, bad: "/workspace/up leads outside the workspace"},
		{in: "upup", kind: proto.FaultOutside, bad: "/workspace/upup leads outside the workspace"},
		{in: "absup", kind: proto.FaultOutside, bad: "/workspace/absup leads outside the workspace"},
		{in: "tmp", kind: proto.FaultOutside, bad: "outside the workspace"},
		{in: "absdir/../up", kind: proto.FaultOutside, bad: "outside the workspace"},
		{in: "/workspace/../etc/passwd", kind: proto.FaultOutside, bad: "outside the workspace"},
		{in: "/workspacefoo/x", kind: proto.FaultOutside, bad: "outside the workspace"},
		{in: "a/../../x", kind: proto.FaultOutside, bad: "outside the workspace"},
		{in: "loop", kind: proto.FaultTooManyLinks, bad: "too many symbolic links"},
		{in: "real.txt/x", kind: proto.FaultNotDirPath, bad: "not a directory"},
		{in: "", kind: proto.FaultBadPath, bad: "path is empty"},
		{in: "a\x00b", kind: proto.FaultBadPath, bad: "NUL"},
	} {
		var res proto.FileStatResult
		if err := c.Call(context.Background(), proto.OpFileStat, proto.FileStatArgs{Path: tc.in}, nil, &res); err != nil {
			t.Fatal(err)
		}
		switch {
		case tc.bad == "" && (res.Fault != nil || res.Jail != tc.want):
			t.Errorf("stat %q = %q, %+v; want %q", tc.in, res.Jail, res.Fault, tc.want)
		case tc.bad != "" && (res.Fault == nil || res.Fault.Kind != tc.kind || !strings.Contains(res.Fault.Message, tc.bad)):
			t.Errorf("stat %q = %q, %+v; want a %s fault containing %q", tc.in, res.Jail, res.Fault, tc.kind, tc.bad)
		}
	}
}

// Every refusal says what it is about, in the words the tools show.
func TestFileFaults(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	c := filesPair(t, dir)
	read := func(p string) *proto.FileFault {
		_, res := readVia(t, c, p, 10)
		return res.Fault
	}
	write := func(p string) *proto.FileFault {
		return writeVia(t, c, proto.FileWriteArgs{Path: p, MaxGrow: -1}, "x").Fault
	}
	for _, tc := range []struct {
		name string
		f    *proto.FileFault
		kind string
		msg  string
	}{
		{"missing", read("missing.txt"), proto.FaultNotFound, "missing.txt does not exist: check the path (it is relative to /workspace)"},
		{"outside", read("../x"), proto.FaultOutside, `path "../x" is outside the workspace: use a path relative to the workspace or under /workspace`},
		{"fifo", read("pipe"), proto.FaultNotRegular, "pipe is not a regular file (p---------)"},
		{"directory", read("sub"), proto.FaultNotRegular, "sub is a directory"},
		{"too big", read("big"), proto.FaultTooBig, "big is 100 bytes, over the limit of 10"},
		{"write fifo", write("pipe"), proto.FaultNotRegular, "/workspace/pipe is not a regular file"},
		{"write directory", write("sub"), proto.FaultNotRegular, "/workspace/sub is a directory, not a file"},
		{"write the root", write("."), proto.FaultNotRegular, "/workspace is a directory, not a file"},
		{"write under a file", write("big/x"), proto.FaultNotDirPath, "big/x: "},
	} {
		if tc.f == nil || tc.f.Kind != tc.kind || !strings.Contains(tc.f.Message, tc.msg) {
			t.Errorf("%s: %+v; want a %s fault saying %q", tc.name, tc.f, tc.kind, tc.msg)
		}
	}
	if f := read("sub"); f.Jail != "/workspace/sub" || f.Type != proto.TypeDir || f.Op != "read" {
		t.Errorf("the fault does not say what the entry is and where the jail sees it: %+v", f)
	}
	if f := read("big"); f.Size != 100 || f.Limit != 10 {
		t.Errorf("too big: %+v, want size 100 and limit 10", f)
	}
	if f := read("pipe"); f.Type != proto.TypeFIFO {
		t.Errorf("fifo: %+v", f)
	}
}

// A write creates directories, replaces atomically keeping mode and ACL,
// appends, and refuses to grow a file past what it is allowed, writing
// nothing then.
func TestFileWriteAppendAndGrowth(t *testing.T) {
	dir := t.TempDir()
	c := filesPair(t, dir)
	res := writeVia(t, c, proto.FileWriteArgs{Path: "a/b/c.txt", MaxGrow: -1}, "hello\n")
	if res.Fault != nil || res.Jail != "/workspace/a/b/c.txt" || res.Size != 6 || res.OldSize != 0 {
		t.Fatalf("write a new file: %+v %+v", res, res.Fault)
	}
	res = writeVia(t, c, proto.FileWriteArgs{Path: "a/b/c.txt", Append: true, Limit: 1 << 20, MaxGrow: 10}, "world\n")
	if res.Fault != nil || res.Size != 12 || res.OldSize != 6 || res.Refused {
		t.Fatalf("append: %+v %+v", res, res.Fault)
	}
	res = writeVia(t, c, proto.FileWriteArgs{Path: "a/b/c.txt", MaxGrow: 3}, strings.Repeat("x", 20))
	if !res.Refused || res.OldSize != 12 || res.Fault != nil {
		t.Fatalf("a write growing the file by 8 bytes with 3 allowed: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a/b/c.txt")); string(b) != "hello\nworld\n" {
		t.Fatalf("c.txt holds %q", b)
	}
	res = writeVia(t, c, proto.FileWriteArgs{Path: "a/b/c.txt", Append: true, Limit: 5, MaxGrow: -1}, "more")
	if res.Fault == nil || res.Fault.Kind != proto.FaultTooBig {
		t.Fatalf("append to a file over the limit: %+v", res)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "a/b"))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestFileEdit(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("one two two"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := filesPair(t, dir)
	edit := func(old, repl string, all bool) proto.FileEditResult {
		var res proto.FileEditResult
		if err := c.Call(context.Background(), proto.OpFileEdit, proto.FileEditArgs{Path: "f.txt", OldLen: len(old), All: all, Limit: 1 << 20, MaxGrow: -1}, []byte(old+repl), &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	if r := edit("three", "3", false); r.Found != 0 || r.Replaced != 0 {
		t.Errorf("edit of missing text: %+v", r)
	}
	if r := edit("two", "2", false); r.Found != 2 || r.Replaced != 0 {
		t.Errorf("edit of ambiguous text: %+v", r)
	}
	if r := edit("two", "2", true); r.Found != 2 || r.Replaced != 2 || r.Jail != "/workspace/f.txt" || r.OldSize != 11 || r.Size != 7 {
		t.Errorf("replace all: %+v", r)
	}
	if r := edit("one", "1", false); r.Replaced != 1 {
		t.Errorf("edit once: %+v", r)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "f.txt"))
	fi, _ := os.Stat(filepath.Join(dir, "f.txt"))
	if string(b) != "1 2 2" || fi.Mode().Perm() != 0o600 {
		t.Errorf("f.txt: %q %v", b, fi.Mode())
	}
	if err := c.Call(context.Background(), proto.OpFileEdit, proto.FileEditArgs{Path: "f.txt", OldLen: 9, Limit: 1}, []byte("x"), nil); err == nil {
		t.Error("an edit whose old_len does not fit its input was accepted")
	}
}

// A write replaces a file with one that keeps its mode (whatever the
// umask) and ACL; a new file gets 0644.
func TestFileWriteKeepsModeAndACL(t *testing.T) {
	dir := t.TempDir()
	// u::rw-, u:65534:rw-, g::r--, m::rw-, o::---
	acl := []byte{2, 0, 0, 0,
		1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
		2, 0, 6, 0, 0xfe, 0xff, 0, 0,
		4, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
		0x10, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
		0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}
	for name, mode := range map[string]fs.FileMode{"acl.txt": 0o640, "plain.txt": 0o606} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("old"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Setxattr(filepath.Join(dir, "acl.txt"), aclXattr, acl, 0); err != nil {
		t.Fatal(err)
	}
	type attrs struct {
		mode fs.FileMode
		acl  string
	}
	attrsOf := func(name string) attrs {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, name), &st); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 256)
		n, err := unix.Lgetxattr(filepath.Join(dir, name), aclXattr, buf)
		if err != nil {
			n = 0
		}
		return attrs{fs.FileMode(st.Mode & 0o7777), string(buf[:n])}
	}
	before := map[string]attrs{"acl.txt": attrsOf("acl.txt"), "plain.txt": attrsOf("plain.txt")}
	c := filesPair(t, dir)
	for _, name := range []string{"acl.txt", "plain.txt", "new.txt"} {
		if res := writeVia(t, c, proto.FileWriteArgs{Path: name, MaxGrow: -1}, "new"); res.Fault != nil {
			t.Fatal(res.Fault.Message)
		}
	}
	for name, want := range before {
		if got := attrsOf(name); got != want {
			t.Errorf("%s after a write: %+v, want %+v as before", name, got, want)
		}
	}
	if got := attrsOf("new.txt"); got != (attrs{0o644, ""}) {
		t.Errorf("new.txt: %+v, want 0644 and no ACL", got)
	}
}
