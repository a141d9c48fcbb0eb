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
