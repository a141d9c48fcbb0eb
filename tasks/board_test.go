package tasks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox/runner/runnertest"
	"github.com/warrenhq/warren/sessions/sqlschema/sqltest"
)

// clock is an injectable clock that tests move by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 5, 6, 10, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestMain runs the tests on SQLite, then on PostgreSQL (sqltest), with
// the runner built for the boards in a workspace (openIn).
func TestMain(m *testing.M) {
	cleanup, err := runnertest.Install()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := sqltest.Run(m, "")
	cleanup()
	os.Exit(code)
}

// openDB opens the data directory's database the way cmd/warren does: a
// real SQLite file, or on the PostgreSQL pass a real PostgreSQL database.
func openDB(t testing.TB, dir string) *sql.DB {
	t.Helper()
	return sqltest.Open(t, dir)
}

// fixture is a board on a TASKS.md in a temporary directory.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	dir   string
	path  string
	db    *sql.DB
	clock *clock
	board *Board
}

func newFixture(t *testing.T, content string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{t: t, ctx: context.Background(), dir: dir, path: filepath.Join(dir, "TASKS.md"), clock: newClock()}
	if content != "" {
		f.writeFile(content)
	}
	f.db = openDB(t, dir)
	f.board = f.open()
	return f
}

func (f *fixture) open() *Board {
	f.t.Helper()
	b, err := Open(f.ctx, f.db, Options{Path: f.path, Now: f.clock.Now})
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *fixture) writeFile(s string) {
	f.t.Helper()
	if err := os.WriteFile(f.path, []byte(s), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) readFile() string {
	f.t.Helper()
	data, err := os.ReadFile(f.path)
	if err != nil {
		f.t.Fatal(err)
	}
	return string(data)
}

// edit replaces old with new in the file, as a person would.
func (f *fixture) edit(old, new string) {
	f.t.Helper()
	s := f.readFile()
	if !strings.Contains(s, old) {
		f.t.Fatalf("file has no %q:\n%s", old, s)
	}
	f.writeFile(strings.Replace(s, old, new, 1))
}

func (f *fixture) get(id string) Task {
	f.t.Helper()
	task, err := f.board.Get(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return task
}

var (
	alice = Holder{User: "alice", Session: "s-alice"}
	bob   = Holder{User: "bob", Session: "s-bob"}
)

func TestOpenMigratesOnce(t *testing.T) {
	f := newFixture(t, "")
	for range 2 {
		if _, err := Open(f.ctx, f.db, Options{Path: f.path}); err != nil {
			t.Fatal(err)
		}
	}
	var v int
	if err := f.db.QueryRow(`SELECT version FROM schema_versions WHERE component = 'tasks'`).Scan(&v); err != nil || v != 2 {
		t.Fatalf("schema version = %d, %v; want 2", v, err)
	}
	if _, err := Open(f.ctx, f.db, Options{}); ErrorCode(err) != CodeInvalid {
		t.Fatalf("Open without a path: %v", err)
	}
}

func TestImportAndWriteBack(t *testing.T) {
	for name := range wantIDs {
		t.Run(name, func(t *testing.T) {
			data := string(readTestdata(t, name))
			f := newFixture(t, data)
			list, err := f.board.List(f.ctx, Filter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != len(wantIDs[name]) {
				t.Fatalf("imported %d tasks, want %d", len(list), len(wantIDs[name]))
			}
			if got := f.readFile(); got != data {
				t.Fatalf("a read rewrote the file:\n%s", got)
			}
			added, err := f.board.Add(f.ctx, "Écrire les tests — テスト")
			if err != nil {
				t.Fatal(err)
			}
			last := wantIDs[name][len(wantIDs[name])-1]
			if added.ID != taskID(last+1) {
				t.Fatalf("new id = %s, want %s", added.ID, taskID(last+1))
			}
			got := f.readFile()
			d := parse([]byte(got))
			d.remove(d.find(last + 1))
			if string(d.bytes()) != data {
				t.Fatalf("adding a task changed other text:\n%s", got)
			}
			if !strings.Contains(got, "[ ] "+added.ID+" Écrire les tests — テスト") {
				t.Fatalf("file lacks the new task:\n%s", got)
			}
			// A fresh board on the same database and file sees the same thing.
			again, err := f.open().List(f.ctx, Filter{})
			if err != nil || len(again) != len(list)+1 {
				t.Fatalf("reopened board lists %d tasks, %v", len(again), err)
			}
		})
	}
}

func TestAddToMissingFile(t *testing.T) {
	f := newFixture(t, "")
	if _, err := os.Stat(f.path); !os.IsNotExist(err) {
		t.Fatal("the file exists before any change")
	}
	for _, title := range []string{"First", "Second"} {
		if _, err := f.board.Add(f.ctx, title); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := f.readFile(), "- [ ] T-1 First\n- [ ] T-2 Second\n"; got != want {
		t.Fatalf("file = %q, want %q", got, want)
	}
	// Removing the file is not deleting the board: it is written afresh.
	os.Remove(f.path)
	if _, err := f.board.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.readFile(); !strings.Contains(got, "T-2 Second") {
		t.Fatalf("file not restored: %q", got)
	}
}

func TestUpdateFlow(t *testing.T) {
	f := newFixture(t, "# Board\r\n\r\n- [ ] T-1 Add retry to the fetcher\r\n\r\nNotes below.")
	if _, err := f.board.Claim(f.ctx, "T-1", alice, time.Hour); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(90 * time.Second)
	if _, err := f.board.Update(f.ctx, "T-1", Change{Note: "backoff is exponential"}, alice); err != nil {
		t.Fatal(err)
	}
	task, err := f.board.Update(f.ctx, "t-1", Change{Status: "done", Link: "https://github.com/warrenhq/warren/pull/7"}, alice)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != StatusDone || task.Claim != nil || task.Link == "" || len(task.Notes) != 1 {
		t.Fatalf("task after done = %+v", task)
	}
	want := "# Board\r\n\r\n- [x] T-1 Add retry to the fetcher @alice\r\n" +
		"  - 2026-05-06 10:01 @alice: backoff is exponential\r\n" +
		"  - link: https://github.com/warrenhq/warren/pull/7\r\n\r\nNotes below."
	if got := f.readFile(); got != want {
		t.Fatalf("file =\n%q\nwant\n%q", got, want)
	}
	// A note on an unclaimed task is fine; it is stamped with its author.
	if _, err := f.board.Update(f.ctx, "T-1", Change{Note: "verified in staging"}, bob); err != nil {
		t.Fatal(err)
	}
	if n := f.get("T-1").Notes; len(n) != 2 || n[1].By != "bob" {
		t.Fatalf("notes = %+v", n)
	}
}

func TestListFilters(t *testing.T) {
	f := newFixture(t, string(readTestdata(t, "simple.md")))
	cases := []struct {
		filter Filter
		want   []string
	}{
		{Filter{Status: StatusOpen}, []string{"T-2", "T-7", "T-8"}},
		{Filter{Owner: "@bob"}, []string{"T-3"}},
		{Filter{Owner: "Alice", Status: StatusInProgress}, []string{"T-1"}},
		{Filter{Status: StatusDone, Owner: "alice"}, nil},
	}
	for _, c := range cases {
		list, err := f.board.List(f.ctx, c.filter)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, task := range list {
			got = append(got, task.ID)
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("List(%+v) = %v, want %v", c.filter, got, c.want)
		}
	}
}

func TestBadInput(t *testing.T) {
	f := newFixture(t, "- [ ] T-1 One\n- [x] T-2 Two\n")
	if _, err := f.board.Claim(f.ctx, "T-1", alice, 0); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  error
		code Code
		msg  string
	}{
		{"unknown id", errOf(f.board.Update(f.ctx, "T-99", Change{Note: "x"}, alice)), CodeNotFound, "no task T-99"},
		{"malformed id", errOf(f.board.Get(f.ctx, "task one")), CodeInvalid, "want T-<number>"},
		{"empty title", errOf(f.board.Add(f.ctx, "   ")), CodeInvalid, "title is empty"},
		{"multi-line title", errOf(f.board.Add(f.ctx, "one\ntwo")), CodeInvalid, "single line"},
		{"title ending in a mention", errOf(f.board.Add(f.ctx, "ping @bob")), CodeInvalid, "owner"},
		{"invalid status", errOf(f.board.Update(f.ctx, "T-1", Change{Status: "finished"}, alice)), CodeInvalid, "open, in_progress, blocked, done"},
		{"invalid filter", errOf(f.board.List(f.ctx, Filter{Status: "closed"})), CodeInvalid, "use one of"},
		{"nothing to change", errOf(f.board.Update(f.ctx, "T-1", Change{}, alice)), CodeInvalid, "nothing to change"},
		{"update by a non-holder", errOf(f.board.Update(f.ctx, "T-1", Change{Note: "mine now"}, bob)), CodeClaimed, "claimed by alice (session s-alice)"},
		{"done by a non-holder", errOf(f.board.Update(f.ctx, "T-1", Change{Status: StatusDone}, bob)), CodeClaimed, "claimed by alice"},
		{"claim of a done task", errOf(f.board.Claim(f.ctx, "T-2", bob, 0)), CodeInvalid, "T-2 is done"},
		{"claim without a session", errOf(f.board.Claim(f.ctx, "T-1", Holder{User: "bob"}, 0)), CodeInvalid, "session id is required"},
		{"claim with a bad user", errOf(f.board.Claim(f.ctx, "T-1", Holder{User: "bob smith", Session: "s"}, 0)), CodeInvalid, "invalid user name"},
		{"renew by a non-holder", errOf(f.board.Renew(f.ctx, "T-1", bob, 0)), CodeClaimed, "claimed by alice"},
		{"release by a non-holder", f.board.Release(f.ctx, "T-1", bob), CodeClaimed, "claimed by alice"},
		{"resolve without a conflict", errOf(f.board.Resolve(f.ctx, "T-1", KeepFile)), CodeInvalid, "no conflict"},
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if ErrorCode(c.err) != c.code || !strings.Contains(c.err.Error(), c.msg) {
			t.Errorf("%s: %v (code %q), want code %q and %q", c.name, c.err, ErrorCode(c.err), c.code, c.msg)
		}
	}
	if err := f.board.Release(f.ctx, "T-1", alice); err != nil {
		t.Fatal(err)
	}
	if err := f.board.Release(f.ctx, "T-1", alice); !errors.Is(err, ErrClaimed) {
		t.Errorf("second release: %v", err)
	}
	// Done on an unclaimed task needs a claim first.
	_, err := f.board.Update(f.ctx, "T-1", Change{Status: StatusDone}, alice)
	if !errors.Is(err, ErrClaimed) || !strings.Contains(err.Error(), "claim it before") {
		t.Errorf("done without a claim: %v", err)
	}
}

func errOf(_ any, err error) error { return err }
