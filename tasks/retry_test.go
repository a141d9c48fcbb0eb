package tasks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A sync takes a hand edit onto the board, then finds the file changed
// again when it comes to write it (the person saved once more), and
// starts over. The board's version of the task is then the file's of a
// moment ago: a second edit of the same task is one side's change, not a
// conflict, whether the sync writes at its next try or gives up after
// five (the file kept changing) and a later sync merges. Both ways of
// writing are run: the CLI's (the base from the database) and the
// server's (the base of its own fast writes, kept in memory).
func TestSyncRetryAfterTakingAHandEdit(t *testing.T) {
	ctx := context.Background()
	agent := Holder{User: "agent", Session: "s-agent"}
	for _, server := range []bool{false, true} {
		for _, giveUp := range []bool{false, true} {
			name := fmt.Sprintf("server=%v gives up=%v", server, giveUp)
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, "TASKS.md")
				if err := os.WriteFile(path, []byte(raceBoard), 0o644); err != nil {
					t.Fatal(err)
				}
				db := openDB(t, dir)
				opts := Options{Path: path, Now: newClock().Now}
				if server {
					// Background saves of the base wait for an hour:
					// the fast writes' base stays in memory.
					opts.Coalesce = time.Hour
				}
				b, err := Open(ctx, db, opts)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { b.Close(ctx) })
				b.settle = 0 // the person saves by rename: whole at once
				if _, err := b.Sync(ctx); err != nil {
					t.Fatal(err)
				}
				// The person opens the file; an agent's note is written to
				// it (on the server by a fast write whose base is not
				// saved yet); the person saves a copy without it, so the
				// sync has the note to write.
				p := &person{t: t, path: path, rename: true}
				p.open()
				if _, err := b.Update(ctx, "T-1", Change{Note: "before the edits"}, agent); err != nil {
					t.Fatal(err)
				}
				p.saveTask(1, 1) // T-1 One edit1
				edits := 1
				b.beforeWrite = func() {
					// The sync has taken edit1 onto the board; the person
					// edits the same task again before it writes.
					if !giveUp && edits > 1 {
						return
					}
					edits++
					p.open()
					p.saveTask(1, edits)
				}
				_, err = b.Sync(ctx)
				b.beforeWrite = nil
				if giveUp {
					if err == nil || !strings.Contains(err.Error(), "kept changing") {
						t.Fatalf("sync against a file saved before every write: %v, want the file kept changing", err)
					}
					// The person saves once more, and stops.
					edits++
					p.open()
					p.saveTask(1, edits)
					_, err = b.Sync(ctx)
				}
				if err != nil {
					t.Fatalf("sync after %d edits of T-1 by one person: %v", edits, err)
				}
				want := "One"
				for k := 1; k <= edits; k++ {
					want += fmt.Sprintf(" edit%d", k)
				}
				task, err := b.Get(ctx, "T-1")
				if err != nil {
					t.Fatal(err)
				}
				if task.Title != want {
					t.Errorf("T-1 on the board is %q, want the last hand edit %q", task.Title, want)
				}
				if len(task.Notes) != 1 || task.Notes[0].Text != "before the edits" {
					t.Errorf("T-1's notes on the board: %+v, want the acknowledged one", task.Notes)
				}
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(data), "- [ ] T-1 "+want+"\n  - 2026-05-06 10:00 @agent: before the edits\n") {
					t.Errorf("the file does not show T-1 as the board has it:\n%s", data)
				}
			})
		}
	}
}
