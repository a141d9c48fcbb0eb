package runner

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
)

func exactWrite(t *testing.T, c *client.Conn, p, data string, ifMissing bool, ifStamp *proto.FileStamp) proto.FileWriteResult {
	t.Helper()
	a := proto.FileWriteArgs{Path: p, MaxGrow: -1, Exact: true, IfMissing: ifMissing, IfStamp: ifStamp}
	return writeVia(t, c, a, data)
}

func exactRead(t *testing.T, c *client.Conn, p string) (string, proto.FileReadResult) {
	t.Helper()
	st, err := c.Open(context.Background(), proto.OpFileRead, proto.FileReadArgs{Path: p, Limit: 1 << 20, Exact: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, _ := io.ReadAll(st)
	var res proto.FileReadResult
	if err := st.Result(&res); err != nil {
		t.Fatal(err)
	}
	return string(b), res
}

func kindOf(f *proto.FileFault) string {
	if f == nil {
		return ""
	}
	return f.Kind + " " + f.Jail
}

// The task board's file through the runner: a compare-and-write against
// the stamp of the version read, no link followed, no hard-linked file,
// stale temporary files removed.
func TestExactFileOperations(t *testing.T) {
	dir := t.TempDir()
	c := filesPair(t, dir)
	path := filepath.Join(dir, "docs", "TASKS.md")

	// Created with its directory, only while it is missing.
	res := exactWrite(t, c, "docs/TASKS.md", "v1\n", true, nil)
	if res.Fault != nil || res.Stamp == nil {
		t.Fatalf("create: %+v", res)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Sys().(*syscall.Stat_t).Ino != res.Stamp.Ino || res.Stamp.Size != 3 {
		t.Fatalf("the stamp %+v is not the file's: %v", res.Stamp, err)
	}
	v1 := *res.Stamp
	if res := exactWrite(t, c, "docs/TASKS.md", "again\n", true, nil); kindOf(res.Fault) != "changed /workspace/docs/TASKS.md" {
		t.Fatalf("create over an existing file: %+v", res.Fault)
	}
	// Replaced only while it is the version read.
	res = exactWrite(t, c, "docs/TASKS.md", "v2\n", false, &v1)
	if res.Fault != nil || res.Stamp == nil || res.Stamp.Ino == v1.Ino {
		t.Fatalf("replace v1: %+v", res)
	}
	v2 := *res.Stamp
	if res := exactWrite(t, c, "docs/TASKS.md", "stale\n", false, &v1); kindOf(res.Fault) != "changed /workspace/docs/TASKS.md" {
		t.Fatalf("a write against an old version: %+v", res.Fault)
	}
	if b, _ := os.ReadFile(path); string(b) != "v2\n" {
		t.Fatalf("content %q", b)
	}
	var st proto.FileStatResult
	if err := c.Call(context.Background(), proto.OpFileStat, proto.FileStatArgs{Path: "docs/TASKS.md", Exact: true}, nil, &st); err != nil || st.Stamp == nil || *st.Stamp != v2 {
		t.Fatalf("stat: %+v %v, want %+v", st, err, v2)
	}
	if got, res := exactRead(t, c, "docs/TASKS.md"); got != "v2\n" || res.Stamp == nil || *res.Stamp != v2 {
		t.Fatalf("read: %q %+v", got, res)
	}

	// No link is followed, even one inside the workspace.
	if err := os.Symlink("docs", filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	if got, res := exactRead(t, c, "alias/TASKS.md"); got != "" || kindOf(res.Fault) != "link /workspace/alias" {
		t.Fatalf("read through a directory link: %q %+v", got, res.Fault)
	}
	if res := exactWrite(t, c, "alias/TASKS.md", "x\n", false, &v2); kindOf(res.Fault) != "link /workspace/alias" {
		t.Fatalf("write through a directory link: %+v", res.Fault)
	}
	if err := os.Symlink("TASKS.md", filepath.Join(dir, "docs", "LINK.md")); err != nil {
		t.Fatal(err)
	}
	if _, res := exactRead(t, c, "docs/LINK.md"); kindOf(res.Fault) != "link /workspace/docs/LINK.md" {
		t.Fatalf("read of a link: %+v", res.Fault)
	}
	// A hard link is the same file elsewhere: refused.
	if err := os.Link(path, filepath.Join(dir, "copy.md")); err != nil {
		t.Fatal(err)
	}
	if got, res := exactRead(t, c, "docs/TASKS.md"); got != "" || kindOf(res.Fault) != "hard_links /workspace/docs/TASKS.md" || res.Stamp == nil || res.Stamp.Links != 2 {
		t.Fatalf("read of a hard-linked file: %q %+v", got, res)
	}
	os.Remove(filepath.Join(dir, "copy.md"))

	// A temporary file a killed writer left a while ago goes; a fresh
	// one and the copy of a rewrite in place stay.
	stale := filepath.Join(dir, "docs", ".TASKS.md.warren-0123456789ab")
	fresh := filepath.Join(dir, "docs", ".TASKS.md.warren-ba9876543210")
	kept := filepath.Join(dir, "docs", ".TASKS.md.warren-aaaa.old")
	for _, p := range []string{stale, fresh, kept} {
		os.WriteFile(p, []byte("half"), 0o644)
	}
	long := time.Now().Add(-2 * time.Minute)
	os.Chtimes(stale, long, long)
	os.Chtimes(kept, long, long)
	_, cur := exactRead(t, c, "docs/TASKS.md")
	if res := exactWrite(t, c, "docs/TASKS.md", "v3\n", false, cur.Stamp); res.Fault != nil {
		t.Fatalf("write v3: %+v", res.Fault)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale temporary file is left: %v", err)
	}
	for _, p := range []string{fresh, kept} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(p), err)
		}
	}
}
