package tasks

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A person's editor saves TASKS.md in place right after the board renamed
// its new file over it, before the board looked at what it had written:
// the board must not take the person's file for its own. If it did, its
// next fast write would find "its" file unchanged and write over the hand
// edit, and a sync would read a file caught half saved (truncated) at
// once, without waiting for it to settle, and take the tasks missing from
// it for deleted, notes and all.
func TestHandSaveRightAfterTheBoardsRename(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "TASKS.md")
	if err := os.WriteFile(path, []byte(raceBoard), 0o644); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, dir)
	b, err := Open(ctx, db, Options{Path: path, Now: newClock().Now, Coalesce: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(ctx) })
	b.settle = 0 // the person's save below is whole before anyone reads
	if _, err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	agent := Holder{User: "agent", Session: "s-agent"}
	p := &person{t: t, path: path} // saves in place
	p.open()
	saved := false
	b.setStep(func(step string) {
		if step == "renamed" && !saved {
			saved = true
			p.saveTask(2, 1) // T-2 Two edit1, from the copy read before
		}
	})
	if _, err := b.Update(ctx, "T-1", Change{Note: "first"}, agent); err != nil {
		t.Fatal(err)
	}
	b.setStep(nil)
	if !saved {
		t.Fatal("the board's write never renamed its file over TASKS.md")
	}
	// The next change, and a sync.
	if _, err := b.Update(ctx, "T-3", Change{Note: "second"}, agent); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	task, err := b.Get(ctx, "T-2")
	if err != nil {
		t.Fatal(err)
	}
	if task.Title != "Two edit1" {
		t.Errorf("T-2 on the board is %q: the hand edit saved right after the board's write was lost", task.Title)
	}
	checkNotes(t, ctx, b, []acked{{"T-1", "first"}, {"T-3", "second"}}, "after the hand save")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "- [ ] T-2 Two edit1\n") {
		t.Errorf("the file lost the hand edit of T-2:\n%s", data)
	}
}

// An editor that saves in place empties the file, then writes it; on a
// loaded machine it may not get to the write for longer than the board
// waits for a file to settle. An empty file is taken for such a save, not
// for every task deleted by hand: after waiting a while longer, the board
// writes the file afresh, as it does a missing one, and no acknowledged
// note goes.
func TestEmptiedFileIsNotEveryTaskDeleted(t *testing.T) {
	f := newFixture(t, board3)
	f.board.settle = 0 // the file below is as old as a stalled save's
	agent := Holder{User: "agent", Session: "s-agent"}
	if _, err := f.board.Update(f.ctx, "T-1", Change{Note: "acknowledged"}, agent); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.board.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	tasks, err := f.board.List(f.ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 3 {
		t.Fatalf("%d tasks on the board after TASKS.md was found empty, want the 3 it had: %+v", len(tasks), tasks)
	}
	checkNotes(t, f.ctx, f.board, []acked{{"T-1", "acknowledged"}}, "after an empty file")
	if file := f.readFile(); !strings.Contains(file, "- [ ] T-3 Three\n") {
		t.Errorf("the file was not written afresh:\n%s", file)
	}
}
