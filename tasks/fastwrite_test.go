package tasks

import (
	"testing"
	"time"
)

// The fast write splices a changed task into the file it wrote last; the
// result must be exactly what rendering the whole document gives, for
// files of every shape.
func TestSpliceMatchesRender(t *testing.T) {
	docs := []string{
		"# Board\n\n- [ ] T-1 One\n- [ ] T-2 Two\n\n## Done\n",
		"- [ ] T-1 One\r\n  - 2026-05-01 10:00 @a: x\r\n- [ ] T-2 Two\r\n",
		"- [ ] T-1 One\n- [ ] T-2 Two",
		"intro\n- [ ] T-2 Two\n  - link: abc\n  prose under it\n- [ ] T-1 One\n  ```\n  code\n  ```",
	}
	at := time.Date(2026, 5, 6, 10, 0, 0, 0, time.UTC)
	for _, src := range docs {
		for _, n := range []int{1, 2} {
			d := parse([]byte(src))
			raw := d.bytes()
			tk := d.find(n)
			it := tk.item
			it.Status, it.Owner = StatusInProgress, "alice"
			it.Notes = append(append([]Note(nil), it.Notes...), Note{At: at, By: "alice", Text: "a note"})
			it.Link = "https://example.com/pr/1"
			start, length := d.span(tk)
			d.set(tk, it)
			got := string(d.splice(nil, raw, start, length, d.find(n)))
			if want := string(d.bytes()); got != want {
				t.Errorf("T-%d in %q:\nsplice %q\nrender %q", n, src, got, want)
			}
		}
	}
}

// A person who changes, right after a server's write, the field that write
// changed is editing the file as written: the file's version is taken,
// with no conflict, though the server has not saved its sync base yet.
func TestHandEditAfterFastWriteIsNoConflict(t *testing.T) {
	f := newFixture(t, board3)
	b, err := Open(f.ctx, f.db, Options{Path: f.path, Now: f.clock.Now, Coalesce: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(f.ctx)
	if _, err := b.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(f.ctx, "T-2", Change{Status: StatusBlocked}, alice); err != nil {
		t.Fatal(err)
	}
	if b.cache == nil || !b.cache.unsaved {
		t.Fatal("the change was not written the server's way (fast, base saved later)")
	}
	f.edit("- [!] T-2 Two", "- [~] T-2 Two")
	if _, err := b.Sync(f.ctx); err != nil {
		t.Fatalf("sync after the hand edit: %v", err)
	}
	if task, err := b.Get(f.ctx, "T-2"); err != nil || task.Status != StatusInProgress || task.Conflict {
		t.Fatalf("T-2 = %+v, %v; want the hand edit, in progress", task, err)
	}
}
