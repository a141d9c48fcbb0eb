package tasks

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

const board3 = "# Board\n\nIntro prose.\n\n- [ ] T-1 One\n- [ ] T-2 Two\n- [ ] T-3 Three\n\n## Done\n"

func TestHandEditsAreMerged(t *testing.T) {
	f := newFixture(t, board3)
	if _, err := f.board.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.edit("- [ ] T-1 One", "- [!] T-1 One, renamed @carol\n  - 2026-05-06 09:00 @carol: waiting for the API key")
	f.edit("- [ ] T-3 Three\n", "- [ ] T-50 Added by hand\n")
	f.edit("Intro prose.", "Intro prose, edited.")
	report, err := f.board.Sync(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"T-1", "T-50"}; !reflect.DeepEqual(report.Imported, want) {
		t.Errorf("imported %v, want %v", report.Imported, want)
	}
	if want := []string{"T-3"}; !reflect.DeepEqual(report.Removed, want) || report.Written {
		t.Errorf("report = %+v", report)
	}
	t1 := f.get("T-1")
	if t1.Title != "One, renamed" || t1.Status != StatusBlocked || t1.Owner != "carol" || len(t1.Notes) != 1 {
		t.Fatalf("T-1 = %+v", t1)
	}
	if _, err := f.board.Get(f.ctx, "T-3"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("T-3 deleted by hand: %v", err)
	}
	// Ids are never reused: not 3 (deleted), and after the largest seen.
	added, err := f.board.Add(f.ctx, "After the hand edit")
	if err != nil || added.ID != "T-51" {
		t.Fatalf("Add = %+v, %v; want T-51", added, err)
	}
	f.edit("- [ ] T-51 After the hand edit\n", "")
	if _, err := f.board.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	if added, _ := f.board.Add(f.ctx, "Later"); added.ID != "T-52" {
		t.Fatalf("id after deleting T-51 = %s, want T-52", added.ID)
	}
	if got := f.readFile(); !strings.Contains(got, "Intro prose, edited.") || !strings.Contains(got, "- [ ] T-52 Later\n\n## Done\n") {
		t.Fatalf("file =\n%s", got)
	}
}

// TestHandEditDuringWrite edits the file by hand at the worst moment:
// after the board has rendered its change and before it replaces the file.
// The change must be merged with the edit, not written over it.
func TestHandEditDuringWrite(t *testing.T) {
	f := newFixture(t, board3)
	if _, err := f.board.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	edits := 0
	f.board.beforeWrite = func() {
		if edits++; edits == 1 {
			f.edit("T-1 One", "T-1 One, edited meanwhile")
		}
	}
	if _, err := f.board.Update(f.ctx, "T-1", Change{Note: "agent note"}, alice); err != nil {
		t.Fatal(err)
	}
	got := f.readFile()
	if !strings.Contains(got, "T-1 One, edited meanwhile\n  - 2026-05-06 10:00 @alice: agent note\n") {
		t.Fatalf("file lost one side:\n%s", got)
	}
	if task := f.get("T-1"); task.Title != "One, edited meanwhile" || len(task.Notes) != 1 || task.Conflict {
		t.Fatalf("T-1 = %+v", task)
	}
}

// failWrites makes the board's file writes fail until the returned
// function is called.
func failWrites(f *fixture) (restore func()) {
	write := f.board.write
	f.board.write = func(context.Context, []byte, current) (FileStamp, error) { return FileStamp{}, errors.New("disk full") }
	return func() { f.board.write = write }
}

func TestUnwrittenChangeIsWrittenLater(t *testing.T) {
	f := newFixture(t, board3)
	restore := failWrites(f)
	task, err := f.board.Update(f.ctx, "T-2", Change{Status: StatusBlocked}, alice)
	if !errors.Is(err, ErrNotWritten) || !strings.Contains(err.Error(), "disk full") || task.Status != StatusBlocked {
		t.Fatalf("Update with a failing write = %+v, %v", task, err)
	}
	if strings.Contains(f.readFile(), "[!] T-2") {
		t.Fatal("the file was written")
	}
	restore()
	report, err := f.board.Sync(f.ctx)
	if err != nil || !report.Written || !strings.Contains(f.readFile(), "- [!] T-2 Two") {
		t.Fatalf("Sync = %+v, %v; file:\n%s", report, err, f.readFile())
	}
}

func TestConflictIsReportedNotOverwritten(t *testing.T) {
	for _, keep := range []Side{KeepFile, KeepBoard} {
		f := newFixture(t, board3)
		restore := failWrites(f)
		if _, err := f.board.Update(f.ctx, "T-1", Change{Note: "board side", Status: StatusInProgress}, alice); !errors.Is(err, ErrNotWritten) {
			t.Fatal(err)
		}
		restore()
		f.edit("- [ ] T-1 One", "- [!] T-1 One, file side")
		f.edit("T-2 Two", "T-2 Two, no conflict here")
		report, err := f.board.Sync(f.ctx)
		var ce *ConflictError
		if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) || ErrorCode(err) != CodeConflict || !strings.Contains(err.Error(), "T-1") {
			t.Fatalf("Sync = %v, want a conflict naming T-1", err)
		}
		c := report.Conflicts[0]
		if len(report.Conflicts) != 1 || c.TaskID != "T-1" || c.File.Title != "One, file side" || c.Board.Status != StatusInProgress {
			t.Fatalf("conflicts = %+v", report.Conflicts)
		}
		file := f.readFile()
		if !strings.Contains(file, "- [!] T-1 One, file side\n") || strings.Contains(file, "board side") {
			t.Fatalf("the hand edit was overwritten:\n%s", file)
		}
		if f.get("T-2").Title != "Two, no conflict here" {
			t.Fatal("the edit that did not conflict was not merged")
		}
		// The conflict stays until it is settled, and blocks changes to T-1.
		if _, err := f.board.Sync(f.ctx); !errors.Is(err, ErrConflict) {
			t.Fatalf("second Sync = %v", err)
		}
		if task := f.get("T-1"); !task.Conflict || task.Title != "One" {
			t.Fatalf("T-1 = %+v", task)
		}
		if _, err := f.board.Update(f.ctx, "T-1", Change{Note: "more"}, alice); !errors.Is(err, ErrConflict) {
			t.Fatalf("update of a conflicting task = %v", err)
		}
		if _, err := f.board.Claim(f.ctx, "T-1", alice, time.Minute); !errors.Is(err, ErrConflict) {
			t.Fatalf("claim of a conflicting task = %v", err)
		}

		task, err := f.board.Resolve(f.ctx, "T-1", keep)
		if err != nil {
			t.Fatal(err)
		}
		file = f.readFile()
		switch keep {
		case KeepFile:
			// The file's fields win; the board's note is kept: an
			// acknowledged note is never dropped.
			if task.Title != "One, file side" || task.Status != StatusBlocked || len(task.Notes) != 1 ||
				!strings.Contains(file, "- [!] T-1 One, file side\n  - 2026-05-06 10:00 @alice: board side\n") {
				t.Fatalf("keep file: %+v\n%s", task, file)
			}
		case KeepBoard:
			if task.Title != "One" || !strings.Contains(file, "- [~] T-1 One\n  - 2026-05-06 10:00 @alice: board side\n") {
				t.Fatalf("keep board: %+v\n%s", task, file)
			}
		}
		if report, err := f.board.Sync(f.ctx); err != nil || len(report.Conflicts) != 0 {
			t.Fatalf("Sync after resolve = %+v, %v", report, err)
		}
	}
}

func TestSameEditOnBothSidesIsNoConflict(t *testing.T) {
	f := newFixture(t, board3)
	restore := failWrites(f)
	f.board.Update(f.ctx, "T-3", Change{Status: StatusBlocked}, alice) //nolint:errcheck // not written on purpose
	restore()
	f.edit("- [ ] T-3", "- [!] T-3")
	if report, err := f.board.Sync(f.ctx); err != nil || len(report.Conflicts) != 0 {
		t.Fatalf("Sync = %+v, %v", report, err)
	}
}

func TestBadFile(t *testing.T) {
	f := newFixture(t, board3)
	f.edit("- [ ] T-3 Three", "- [ ] T-1 Three")
	_, err := f.board.List(f.ctx, Filter{})
	if ErrorCode(err) != CodeInvalid || !strings.Contains(err.Error(), "T-1 appears twice (lines 5 and 7)") {
		t.Fatalf("List of a file with a duplicate id = %v", err)
	}
	if _, err := f.board.Add(f.ctx, "x"); ErrorCode(err) != CodeInvalid {
		t.Fatalf("Add with a duplicate id in the file = %v", err)
	}
	// A code block left open would swallow a new task: refuse to write it.
	f.writeFile("- [ ] T-1 One\n  ```\n  an unclosed fence\n")
	if _, err := f.board.Add(f.ctx, "swallowed"); !errors.Is(err, ErrNotWritten) || !strings.Contains(err.Error(), "code block") {
		t.Fatalf("Add under an open fence = %v", err)
	}
	if strings.Contains(f.readFile(), "swallowed") {
		t.Fatal("wrote a task where it cannot be read back")
	}
}
