package sessions

import (
	"context"
	"os"
	"path/filepath"
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
