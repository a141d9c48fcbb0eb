package tasks

import (
	"strings"
	"testing"
)

// TestTaskTextsAreBounded: an agent that adds a task with a megabyte
// title, or a note or link of megabytes, is refused with an error that
// says the limit, and the board (file and tasks) is as it was: one note
// of 9 MB would otherwise have pushed TASKS.md past the size the board
// reads, for every user of it.
func TestTaskTextsAreBounded(t *testing.T) {
	f := newFixture(t, "")
	task, err := f.board.Add(f.ctx, "a task")
	if err != nil {
		t.Fatal(err)
	}
	before := f.readFile()
	big := strings.Repeat("x", 9<<20)
	if _, err := f.board.Add(f.ctx, big); err == nil || !strings.Contains(err.Error(), "over the limit") || len(err.Error()) > 1<<10 {
		t.Errorf("a 9 MB title: %.300v", err)
	}
	if _, err := f.board.Update(f.ctx, task.ID, Change{Note: big}, Holder{User: "alice"}); err == nil ||
		!strings.Contains(err.Error(), "over the limit") || len(err.Error()) > 1<<10 {
		t.Errorf("a 9 MB note: %.300v", err)
	}
	if _, err := f.board.Update(f.ctx, task.ID, Change{Link: "https://example.com/" + big}, Holder{User: "alice"}); err == nil ||
		!strings.Contains(err.Error(), "over the limit") {
		t.Errorf("a 9 MB link: %.300v", err)
	}
	if after := f.readFile(); after != before {
		t.Errorf("the board changed:\n%.2000s", after)
	}
	if _, err := f.board.Update(f.ctx, task.ID, Change{Note: strings.Repeat("y", MaxNote)}, Holder{User: "alice"}); err != nil {
		t.Errorf("a note of %d bytes: %v", MaxNote, err)
	}
}
