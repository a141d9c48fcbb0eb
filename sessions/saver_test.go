package sessions

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A state whose write meets a locked database is kept, reported as not
// saved, and written once the lock goes; of several states of one session
// the newest is what stays.
func TestSaverRetriesUntilTheDatabaseTakesTheNewestState(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	m := newManager(t, openDB(t, data), Config{DataDir: data})
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	release := lockDB(t, data)
	m.saver.queue(s.ID, ShellState{Cwd: "/workspace/old", Env: map[string]string{"A": "1"}})
	m.saver.queue(s.ID, ShellState{Cwd: "/workspace/new", Env: map[string]string{"A": "2"}})
	// Longer than one attempt: the first write fails and is retried.
	wctx, cancel := context.WithTimeout(ctx, saveAttempt+time.Second)
	err = m.saver.wait(wctx, s.ID)
	cancel()
	if !errors.Is(err, ErrStateNotSaved) || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("waiting with the database locked: %v", err)
	}
	release()
	if err := m.saver.wait(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	got, err := m.Store().Get(ctx, "alice", s.ID)
	if err != nil || got.Shell.Cwd != "/workspace/new" || got.Shell.Env["A"] != "2" {
		t.Fatalf("saved state: %+v %v", got.Shell, err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// Close writes what is still queued.
func TestCloseFlushesQueuedStates(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	m := newManager(t, openDB(t, data), Config{DataDir: data})
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	release := lockDB(t, data)
	m.saver.queue(s.ID, ShellState{Cwd: "/workspace/x"})
	go func() { time.Sleep(3 * time.Second); release() }()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := m.Store().Get(ctx, "alice", s.ID)
	if err != nil || got.Shell.Cwd != "/workspace/x" {
		t.Fatalf("after Close: %+v %v", got.Shell, err)
	}
}
