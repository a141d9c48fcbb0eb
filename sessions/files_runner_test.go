package sessions

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The file tools reach a paused session's workspace through its jail: the
// read starts the jail (its runner does the reading, inside the jail's
// mounts), and the content is the workspace's.
func TestReadingAPausedSessionStartsItsJail(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, QuotaInterval: time.Hour})
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Workspace, "note.txt"), []byte("paused"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pause(ctx, "alice", s.ID); err != nil {
		t.Fatal(err)
	}
	_, f, err := m.OpenFiles(ctx, "alice", s.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.Read(ctx, "note.txt", 1<<10)
	if err != nil || string(c.Data) != "paused" || c.Jail != "/workspace/note.txt" {
		t.Fatalf("read note.txt of a paused session: %q %q %v", c.Data, c.Jail, err)
	}
	if !m.Running(s.ID) {
		t.Fatal("the paused session's file was read without its jail: the server read the workspace itself")
	}
}

// An archived session's files are read through its jail, whose workspace
// is bound read-only: the manager refuses writes, and even the runner
// itself could not make one.
func TestArchivedSessionsReadThroughAReadOnlyJail(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, QuotaInterval: time.Hour})
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, f, err := m.OpenFiles(ctx, "alice", s.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(ctx, "kept.txt", []byte("kept"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Archive(ctx, "alice", s.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.OpenFiles(ctx, "alice", s.ID, true); err == nil || !strings.Contains(err.Error(), "archived and read-only") {
		t.Fatalf("opening an archived session's files for writing: %v", err)
	}
	_, f, err = m.OpenFiles(ctx, "alice", s.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := f.Read(ctx, "kept.txt", 1<<10); err != nil || string(c.Data) != "kept" {
		t.Fatalf("reading an archived session: %q %v", c.Data, err)
	}
	sh, err := m.Shell(s)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sh.Files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Write(ctx, "kept.txt", []byte("changed"), WriteOptions{MaxGrow: -1}); err == nil {
		t.Fatal("the archived session's runner wrote to its workspace")
	}
	if b, _ := os.ReadFile(filepath.Join(s.Workspace, "kept.txt")); string(b) != "kept" {
		t.Fatalf("kept.txt holds %q", b)
	}
}
