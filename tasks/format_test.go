package tasks

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// wantIDs lists the tasks each testdata file holds; everything else in
// them (examples in code blocks, quotes, tables, plain checklists) is text.
var wantIDs = map[string][]int{
	"simple.md":       {1, 2, 3, 4, 7, 8},
	"nested.md":       {10, 11, 12, 13, 14, 17, 18},
	"code.md":         {20, 21},
	"unicode-crlf.md": {30, 31, 32},
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestRoundTripTestdata(t *testing.T) {
	for name, want := range wantIDs {
		t.Run(name, func(t *testing.T) {
			data := readTestdata(t, name)
			d := parse(data)
			if got := d.bytes(); !bytes.Equal(got, data) {
				t.Fatalf("round trip changed the file:\n got %q\nwant %q", got, data)
			}
			var got []int
			for _, task := range d.tasks() {
				got = append(got, task.Num)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("tasks = %v, want %v", got, want)
			}
		})
	}
}

func TestParseFields(t *testing.T) {
	d := parse(readTestdata(t, "simple.md"))
	t1 := d.find(1).item
	want := item{Num: 1, Title: "Add retry to the fetcher", Status: StatusInProgress, Owner: "alice",
		Link: "https://github.com/warrenhq/warren/pull/14", Notes: []Note{
			{At: time.Date(2026, 5, 1, 9, 12, 0, 0, time.UTC), By: "alice", Text: "exponential backoff, capped at 30s"},
			{At: time.Date(2026, 5, 1, 11, 40, 0, 0, time.UTC), By: "alice", Text: "waiting on review"},
		}}
	if !equalItems(t1, want) {
		t.Errorf("T-1 = %+v\nwant %+v", t1, want)
	}
	cases := []struct {
		num    int
		title  string
		status Status
		owner  string
		notes  int
	}{
		{2, "Document the sandbox profile", StatusOpen, "", 0},
		{3, "Metering export to CSV", StatusBlocked, "bob", 1},
		{4, "Lay down the module", StatusDone, "", 0},
		{8, "Two spaces after the id, trailing space", StatusOpen, "", 0},
	}
	for _, c := range cases {
		it := d.find(c.num).item
		if it.Title != c.title || it.Status != c.status || it.Owner != c.owner || len(it.Notes) != c.notes {
			t.Errorf("T-%d = %+v, want %+v", c.num, it, c)
		}
	}
	u := parse(readTestdata(t, "unicode-crlf.md"))
	if it := u.find(31).item; it.Owner != "たろう" || it.Title != "日本語のエラーメッセージ" {
		t.Errorf("T-31 = %+v", it)
	}
	if it := u.find(30).item; len(it.Notes) != 1 || it.Notes[0].By != "élodie" || it.Notes[0].Text != "première passe faite ✅" {
		t.Errorf("T-30 notes = %+v", it.Notes)
	}
	n := parse(readTestdata(t, "nested.md"))
	if it := n.find(11).item; len(it.Notes) != 1 || it.Notes[0].At.Second() != 33 {
		t.Errorf("T-11 notes = %+v", it.Notes)
	}
}

func TestParseHeadLines(t *testing.T) {
	cases := []struct {
		in     string
		ok     bool
		title  string
		owner  string
		status Status
	}{
		{"- [ ] T-1 Fix it", true, "Fix it", "", StatusOpen},
		{"- [X] T-1 Fix it @bob", true, "Fix it", "bob", StatusDone},
		{"+ [~] T-9 @bob", true, "", "bob", StatusInProgress},
		{"- [!] T-9", true, "", "", StatusBlocked},
		{"- [ ] T-1 mail alice@example.com about it", true, "mail alice@example.com about it", "", StatusOpen},
		{"- [ ] T-1 email @ about it", true, "email @ about it", "", StatusOpen},
		{"- [?] T-1 unknown status", false, "", "", ""},
		{"- [ ] T-01 leading zero", false, "", "", ""},
		{"- [ ] T-0 zero", false, "", "", ""},
		{"- [ ] T-12abc glued", false, "", "", ""},
		{"- [ ]T-1 no space", false, "", "", ""},
		{"-[ ] T-1 no space", false, "", "", ""},
		{"> - [ ] T-1 quoted", false, "", "", ""},
		{"- [ ] T-1234567890 too long", false, "", "", ""},
	}
	for _, c := range cases {
		got := parseHead(line{text: c.in})
		if (got != nil) != c.ok {
			t.Errorf("parseHead(%q) ok = %v, want %v", c.in, got != nil, c.ok)
			continue
		}
		if got != nil && (got.Title != c.title || got.Owner != c.owner || got.Status != c.status) {
			t.Errorf("parseHead(%q) = %q %q %q, want %q %q %q", c.in, got.Title, got.Owner, got.Status, c.title, c.owner, c.status)
		}
	}
}

// textOf concatenates what is not a task: edits must leave it alone.
func textOf(d *document) string {
	var b strings.Builder
	for _, seg := range d.segs {
		for _, l := range seg.lines {
			b.WriteString(l.text + l.eol)
		}
		if seg.task != nil {
			b.WriteString("<task>")
			for _, bl := range seg.task.body {
				if bl.kind == bodyText {
					b.WriteString(bl.text + "|")
				}
			}
		}
	}
	return b.String()
}

// modified returns it with every field changed.
func modified(it item) item {
	it.Title += " (renamed)"
	it.Status = map[Status]Status{StatusOpen: StatusDone, StatusDone: StatusBlocked, StatusBlocked: StatusInProgress, StatusInProgress: StatusOpen}[it.Status]
	it.Owner = "zoë"
	it.Link = "https://example.com/pull/1"
	it.Notes = append(append([]Note(nil), it.Notes...), Note{At: time.Date(2026, 6, 1, 12, 30, 0, 0, time.UTC), By: "zoë", Text: "a new note"})
	return it
}

func TestSetRewritesOnlyTheTask(t *testing.T) {
	for name := range wantIDs {
		data := readTestdata(t, name)
		for _, task := range parse(data).tasks() {
			d := parse(data)
			want := modified(d.find(task.Num).item)
			d.set(d.find(task.Num), want)
			out := d.bytes()
			back := parse(out)
			if got := back.find(task.Num); got == nil || !equalItems(got.item, want) {
				t.Errorf("%s: T-%d reads back as %+v, want %+v\n%s", name, task.Num, got, want, out)
			}
			if textOf(back) != textOf(parse(data)) {
				t.Errorf("%s: editing T-%d changed other text:\n%s", name, task.Num, out)
			}
			if strings.Contains(string(data), "\r\n") && strings.Count(string(out), "\n") != strings.Count(string(out), "\r\n") {
				t.Errorf("%s: editing T-%d mixed line endings: %q", name, task.Num, out)
			}
			if data[len(data)-1] != '\n' && out[len(out)-1] == '\n' {
				t.Errorf("%s: editing T-%d added a final newline", name, task.Num)
			}
		}
	}
}

func TestSetStatusOnlyTouchesTheBox(t *testing.T) {
	d := parse(readTestdata(t, "simple.md"))
	task := d.find(8)
	it := task.item
	it.Status = StatusDone
	d.set(task, it)
	if got := d.find(8).head.text; got != "* [x] T-8  Two spaces after the id, trailing space   " {
		t.Errorf("head = %q", got)
	}
}

func TestInsertAndRemove(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "- [ ] T-5 New\n"},
		{"# Board\n", "# Board\n- [ ] T-5 New\n"},
		{"Some prose", "Some prose\n\n- [ ] T-5 New"},
		{"- [ ] T-1 A\r\n\r\nafter\r\n", "- [ ] T-1 A\r\n- [ ] T-5 New\r\n\r\nafter\r\n"},
		{"* [ ] T-1 A", "* [ ] T-1 A\n* [ ] T-5 New"},
	}
	for _, c := range cases {
		d := parse([]byte(c.in))
		d.insert(item{Num: 5, Title: "New", Status: StatusOpen})
		if got := string(d.bytes()); got != c.want {
			t.Errorf("insert into %q = %q, want %q", c.in, got, c.want)
		}
		d.remove(d.find(5))
		if c.in != "" && !strings.Contains(c.in, "prose") {
			if got := string(d.bytes()); got != c.in {
				t.Errorf("remove from %q = %q", c.in, got)
			}
		}
	}
}

// FuzzParseRoundTrip checks that the parser never panics, that an
// unmodified document renders back byte for byte, and that rewriting a
// task leaves every other line alone and reads back as written.
func FuzzParseRoundTrip(f *testing.F) {
	for name := range wantIDs {
		f.Add(readTestdata(f, name))
	}
	f.Add([]byte("- [ ] T-1 a\r\n  - 2026-01-01 00:00 n\r\n```\r\n- [ ] T-2 b"))
	f.Add([]byte("\n\n- [x] T-3\n\t- link: x\n<!--\n- [ ] T-4 c\n-->\n~~~\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := parse(data)
		if got := d.bytes(); !bytes.Equal(got, data) {
			t.Fatalf("round trip changed the input:\n got %q\nwant %q", got, data)
		}
		seen := map[int]bool{}
		for _, task := range d.tasks() {
			if seen[task.Num] {
				return // duplicates are refused before any rewrite
			}
			seen[task.Num] = true
		}
		for _, task := range d.tasks() {
			e := parse(data)
			it := e.find(task.Num).item
			if checkTitle(it.Title) != nil || checkText("link", it.Link) != nil {
				continue // the board never writes such a task back
			}
			want := modified(it)
			e.set(e.find(task.Num), want)
			back := parse(e.bytes())
			if got := back.find(task.Num); got == nil || !equalItems(got.item, want) {
				t.Fatalf("T-%d reads back as %+v, want %+v from %q", task.Num, got, want, e.bytes())
			}
			if textOf(back) != textOf(parse(data)) {
				t.Fatalf("editing T-%d changed other text: %q", task.Num, e.bytes())
			}
		}
	})
}
