package workspace

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestDiffOfAHugeFileStaysSmall adds a 100 MB file and a 5 MB text file:
// the diff names both without holding either whole, and the patch stays
// within its cap.
func TestDiffOfAHugeFileStaysSmall(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, "README.md", "hello\n")
	a, err := OpenAudit(filepath.Join(t.TempDir(), "audit.git"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.SetBase(ctx, HostTree(ws), "test"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(ws, "huge.bin"))
	if err != nil {
		t.Fatal(err)
	}
	const huge = 100 << 20
	if err := f.Truncate(huge); err != nil { // sparse: costs no disk
		t.Fatal(err)
	}
	f.Close()
	line := "a line of text that goes on for a while, number\n"
	write(t, ws, "big.txt", strings.Repeat(line, 5<<20/len(line)))

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d, err := a.Diff(ctx, HostTree(ws), 64<<10)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("diff of a 100 MB and a 5 MB file: %d MB allocated, patch %d bytes", alloc>>20, len(d.Patch))
	if alloc > 64<<20 {
		t.Errorf("the diff allocated %d MB, want under 64 MB", alloc>>20)
	}
	if len(d.Patch) > 65<<10 {
		t.Errorf("patch of %d bytes over a 64 KiB cap", len(d.Patch))
	}
	got := map[string]FileChange{}
	for _, f := range d.Files {
		got[f.Path] = f
	}
	for _, p := range []string{"huge.bin", "big.txt"} {
		if got[p].Status != "added" {
			t.Errorf("%s: %+v, want added", p, got[p])
		}
	}
	if !strings.Contains(got["huge.bin"].Note, "104857600 bytes") || !strings.Contains(d.Patch, "Large file added, 104857600 bytes") {
		t.Errorf("the huge file is not named with its size: %+v\n%s", got["huge.bin"], d.Patch)
	}
	if strings.Contains(d.Patch, "+"+line[:20]) {
		t.Error("the 5 MB text file is diffed line by line")
	}
}
