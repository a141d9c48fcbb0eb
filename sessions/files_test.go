package sessions

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The files OpenFiles hands out check each write against the quota by
// its growth: a new file counts whole, replacing a file counts only what
// it adds, so an edit near the quota works while a second file is refused.
func TestOpenFilesWritesAreCheckedByGrowth(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, QuotaBytes: 64 << 10, QuotaInterval: time.Hour})
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeVia := func(path string, size int) error {
		t.Helper()
		_, f, err := m.OpenFiles(ctx, "alice", s.ID, true)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Write(ctx, path, []byte(strings.Repeat("x", size)), WriteOptions{})
		return err
	}
	if err := writeVia("a.txt", 40<<10); err != nil {
		t.Fatal(err)
	}
	if err := writeVia("a.txt", 41<<10); err != nil {
		t.Fatalf("replacing a file with one 1 KiB bigger, under the quota: %v", err)
	}
	err = writeVia("b.txt", 40<<10)
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "cannot write /workspace/b.txt") {
		t.Fatalf("a second file crossing the quota: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Workspace, "b.txt")); !os.IsNotExist(err) {
		t.Fatalf("the refused file was written: %v", err)
	}

	// Files opened for reading never write.
	_, f, err := m.OpenFiles(ctx, "alice", s.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(ctx, "c.txt", []byte("x"), WriteOptions{}); err == nil {
		t.Fatal("a write through files opened for reading succeeded")
	}
}
