package runnertest

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// A fake runner's connection walks and measures the host directories its
// jail paths stand for.
func TestServeMapsTheJailsPaths(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Serve(map[string]string{"/workspace": ws})
	defer c.Close()
	ctx := context.Background()
	var du proto.DiskUsageResult
	if err := c.Call(ctx, proto.OpDiskUsage, proto.DiskUsageArgs{Dirs: []string{"/workspace", "/home/warren"}}, nil, &du); err != nil {
		t.Fatal(err)
	}
	if du.Bytes[0] < 64<<10 || du.Errors[1] != "missing" {
		t.Fatalf("du: %+v", du)
	}
	st, err := c.Open(ctx, proto.OpTree, proto.TreeArgs{Root: "/workspace", MaxEntries: 10, MaxDepth: 4, MaxFileBytes: 1 << 20, MaxReadBytes: 1 << 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := proto.NewTreeReader(st, proto.TreeLimits{MaxEntries: 10, MaxDepth: 4, MaxFileBytes: 1 << 20, MaxReadBytes: 1 << 20})
	rec, err := r.Next()
	if err != nil || rec.Name != "a.txt" || rec.Flag != proto.ContentSent {
		t.Fatalf("first record %+v, %v", rec, err)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after a.txt: %v", err)
	}
}
