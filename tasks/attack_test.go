package tasks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/sessions/sqlschema"
	"github.com/warrenhq/warren/sessions/sqlschema/sqltest"
)

// The board's file in a workspace is the jail's: these tests act on the
// workspace as a jail would, and check that nothing outside it is read,
// created or changed.

const secret = "root:$6$decoy-secret-hash:19000:0:99999:7:::"

// jailed is a board on <ws>/docs/TASKS.md opened from the workspace, as
// 'serve stdio --workspace ws' opens it, with a root-only decoy outside.
type jailed struct {
	*fixture
	ws, outside, decoy string
}

func newJailed(t *testing.T) *jailed {
	t.Helper()
	data, ws, outside := t.TempDir(), t.TempDir(), t.TempDir()
	// The board's jail runs as the workspace's owner, as a session's
	// does: under root, another uid, which must be able to reach it.
	if err := os.Chmod(filepath.Dir(ws), 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(ws, jailUID, jailUID); err != nil {
			t.Fatal(err)
		}
	}
	decoy := filepath.Join(outside, "shadow")
	if err := os.WriteFile(decoy, []byte(secret+"\n- [ ] T-7 Decoy task\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: context.Background(), dir: ws, path: filepath.Join(ws, "docs", "TASKS.md"), clock: newClock()}
	f.db = openDB(t, data)
	b, err := openIn(f.ctx, f.db, ws, f.path, f.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	f.board = b
	return &jailed{fixture: f, ws: ws, outside: outside, decoy: decoy}
}

// check fails when the decoy changed, anything appeared beside it, or its
// content shows up anywhere in the workspace or in text.
func (j *jailed) check(texts ...string) {
	j.t.Helper()
	fi, err := os.Stat(j.decoy)
	if err != nil || fi.Mode().Perm() != 0o600 {
		j.t.Fatalf("decoy changed: %v, %v", fi, err)
	}
	if b, _ := os.ReadFile(j.decoy); !strings.HasPrefix(string(b), secret) {
		j.t.Fatalf("decoy content changed: %q", b)
	}
	if entries, _ := os.ReadDir(j.outside); len(entries) != 1 {
		j.t.Fatalf("the board created files outside the workspace: %v", entries)
	}
	filepath.WalkDir(j.ws, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "decoy-secret") {
				j.t.Fatalf("the decoy was copied into the workspace: %s", p)
			}
		}
		return nil
	})
	for _, s := range texts {
		if strings.Contains(s, "decoy-secret") || strings.Contains(s, "Decoy task") {
			j.t.Fatalf("the decoy leaked into a result: %s", s)
		}
	}
}

// jailUID is the workspace's owner under root, whom its jails run as.
const jailUID = 4242

func (j *jailed) mkdocs() {
	docs := filepath.Join(j.ws, "docs")
	if err := os.MkdirAll(docs, 0o755); err != nil {
		j.t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(docs, jailUID, jailUID); err != nil {
			j.t.Fatal(err)
		}
	}
}

// everything runs every board call and returns what they said.
func (j *jailed) everything() []string {
	var out []string
	say := func(v any, err error) {
		out = append(out, strings.TrimSpace(strings.Join([]string{toText(v), errText(err)}, " ")))
	}
	say(j.board.Add(j.ctx, "Agent task"))
	say(j.board.List(j.ctx, Filter{}))
	say(j.board.Claim(j.ctx, "T-1", alice, 0))
	say(j.board.Update(j.ctx, "T-1", Change{Note: "a note"}, alice))
	say(j.board.Get(j.ctx, "T-7"))
	say(j.board.Sync(j.ctx))
	return out
}

func TestBoardFileLinkIsNotFollowed(t *testing.T) {
	j := newJailed(t)
	j.mkdocs()
	if err := os.Symlink(j.decoy, j.path); err != nil {
		t.Fatal(err)
	}
	said := j.everything()
	j.check(said...)
	if !strings.Contains(strings.Join(said, "\n"), "docs/TASKS.md is a symbolic link") {
		t.Fatalf("no call said the file is a link:\n%s", strings.Join(said, "\n"))
	}
	if fi, err := os.Lstat(j.path); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi, err)
	}
}

func TestBoardDirLinkIsNotFollowed(t *testing.T) {
	j := newJailed(t)
	if err := os.Symlink(j.outside, filepath.Join(j.ws, "docs")); err != nil {
		t.Fatal(err)
	}
	said := j.everything()
	j.check(said...)
	if !strings.Contains(strings.Join(said, "\n"), "docs is a symbolic link") {
		t.Fatalf("no call said docs is a link:\n%s", strings.Join(said, "\n"))
	}
	// The change stands on the board all the same.
	if list, _ := j.board.List(j.ctx, Filter{}); len(list) != 1 || list[0].Title != "Agent task" {
		t.Fatalf("board = %+v", list)
	}
}

func TestBoardFIFOFailsFast(t *testing.T) {
	j := newJailed(t)
	j.mkdocs()
	if err := syscall.Mkfifo(j.path, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan []string, 1)
	go func() { done <- j.everything() }()
	select {
	case said := <-done:
		if all := strings.Join(said, "\n"); !strings.Contains(all, "is not a regular file (a FIFO)") {
			t.Fatalf("no call said the file is a FIFO:\n%s", all)
		}
	case <-time.After(20 * time.Second): // a hang, not a speed limit
		t.Fatal("a board call hangs on a FIFO")
	}
	// Another user's calls work on the same board.
	if _, err := j.board.Claim(j.ctx, "T-1", bob, 0); !errors.Is(err, ErrClaimed) {
		t.Fatalf("bob's claim = %v", err)
	}
	if list, err := j.board.List(j.ctx, Filter{}); len(list) != 1 || !errors.Is(err, ErrNotWritten) {
		t.Fatalf("bob's list = %+v, %v", list, err)
	}
}

func TestHugeBoardIsRefusedUnread(t *testing.T) {
	j := newJailed(t)
	j.mkdocs()
	f, err := os.Create(j.path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("- [ ] T-1 Start of a huge file\n")
	if err := f.Truncate(300 << 20); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	list, err := j.board.List(j.ctx, Filter{})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrNotWritten) || !strings.Contains(err.Error(), "over the task board's limit of 8388608 (8 MiB)") || len(list) != 0 {
		t.Fatalf("List of a 300 MB file = %+v, %v", list, err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Fatalf("reading the board allocated %d MiB", grew>>20)
	}
	if fi, _ := os.Stat(j.path); fi.Size() != 300<<20 {
		t.Fatalf("the huge file was rewritten: %d bytes", fi.Size())
	}
}

// A jail swaps docs/ between a directory and a link to a directory
// outside, and TASKS.md between a file and a link to the decoy, while
// agents change the board: nothing may land outside, nothing leaks in.
func TestBoardSymlinkSwapRace(t *testing.T) {
	j := newJailed(t)
	docs := filepath.Join(j.ws, "docs")
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		real, link := filepath.Join(j.ws, "docs.real"), filepath.Join(j.ws, "docs.link")
		for i := 0; !stop.Load(); i++ {
			os.MkdirAll(real, 0o755)
			os.Remove(filepath.Join(real, "TASKS.md"))
			if i%2 == 0 {
				os.Symlink(j.decoy, filepath.Join(real, "TASKS.md"))
			} else {
				os.WriteFile(filepath.Join(real, "TASKS.md"), []byte("- [ ] T-1 Agent task\n"), 0o644)
			}
			os.Rename(real, docs)
			os.Remove(link)
			os.Symlink(j.outside, link)
			os.Rename(docs, real)
			os.Rename(link, docs) // docs -> outside
			os.Remove(docs)
		}
	}()
	var said []string
	deadline := time.Now().Add(2 * time.Second)
	for n := 0; time.Now().Before(deadline); n++ {
		said = append(said, j.everything()...)
		j.board.Sync(j.ctx) //nolint:errcheck // the race makes it fail often
	}
	stop.Store(true)
	wg.Wait()
	j.check(said...)
}

func TestStaleTempFilesAreRemoved(t *testing.T) {
	j := newJailed(t)
	j.mkdocs()
	old := filepath.Join(j.ws, "docs", ".TASKS.md.warren-0123456789ab.tmp")
	fresh := filepath.Join(j.ws, "docs", ".TASKS.md.warren-ba9876543210.tmp")
	mine := filepath.Join(j.ws, "docs", ".TASKS.md.backup.tmp") // not the board's
	for _, p := range []string{old, fresh, mine} {
		if err := os.WriteFile(p, []byte("- [ ] T-1 half written"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * time.Minute)
	os.Chtimes(old, long, long)
	os.Chtimes(mine, long, long)
	if _, err := j.board.Add(j.ctx, "After a crash"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a stale temporary file is left: %v", err)
	}
	for _, p := range []string{fresh, mine} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s was removed: %v", filepath.Base(p), err)
		}
	}
}

// Issue 10 item 13: a workspace without docs/ gets its board.
func TestBoardCreatesDocsDir(t *testing.T) {
	j := newJailed(t)
	if err := os.Chown(j.ws, 4242, 4343); err != nil && os.Geteuid() == 0 {
		t.Fatal(err)
	}
	if _, err := j.board.Add(j.ctx, "First task"); err != nil {
		t.Fatalf("Add without docs/: %v", err)
	}
	if got := j.readFile(); got != "- [ ] T-1 First task\n" {
		t.Fatalf("TASKS.md = %q", got)
	}
	// A root server hands what it creates to the workspace's owner.
	wantUID := os.Geteuid()
	if wantUID == 0 {
		wantUID = 4242
	}
	for _, p := range []string{filepath.Dir(j.path), j.path} {
		fi, _ := os.Stat(p)
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != wantUID {
			t.Errorf("%s is owned by %d, want %d", p, st.Uid, wantUID)
		}
	}
}

// Issue 10 item 5: a list only reads; it works when neither the file nor
// the database can be written (a full disk).
func TestListWorksWhenNothingCanBeWritten(t *testing.T) {
	f := newFixture(t, board3)
	if _, err := f.board.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.edit("T-2 Two", "T-2 Two, edited by hand")
	restore := failWrites(f)
	defer restore()
	// Another process holds the database's write lock: no write can
	// succeed, as on a full disk.
	if sqltest.Dialect() == sqlschema.Postgres {
		t.Skip("SQLite's busy timeout, set per connection here; PostgreSQL's lock_timeout is set per write transaction")
	}
	other := openDB(t, f.dir)
	tx, err := other.BeginTx(f.ctx, writeTx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	f.db.SetMaxOpenConns(1)
	if _, err := f.db.Exec(`PRAGMA busy_timeout = 100`); err != nil {
		t.Fatal(err)
	}
	list, err := f.board.List(f.ctx, Filter{})
	if len(list) != 3 || !errors.Is(err, ErrNotWritten) || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("List on a read-only disk = %+v, %v", list, err)
	}
}

func toText(v any) string {
	switch x := v.(type) {
	case Task:
		return x.ID + " " + x.Title + " " + x.Owner
	case []Task:
		var s []string
		for _, t := range x {
			s = append(s, toText(t))
		}
		return strings.Join(s, "; ")
	case SyncReport:
		return strings.Join(append(x.Imported, x.Removed...), " ")
	}
	return ""
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Issue 10 item 2: the file shows the last notes of a task and says how
// many older ones the board keeps; task_list has them all.
func TestNotesAreBoundedInTheFile(t *testing.T) {
	f := newFixture(t, board3)
	for i := range 15 {
		f.clock.Add(time.Minute)
		if _, err := f.board.Update(f.ctx, "T-1", Change{Note: fmt.Sprintf("note %d", i)}, alice); err != nil {
			t.Fatal(err)
		}
	}
	file := f.readFile()
	if strings.Count(file, "@alice: note") != shownNotes || !strings.Contains(file, "- [ ] T-1 One\n  - 5 older notes on the board (task_list)\n  - 2026-05-06 10:06 @alice: note 5\n") {
		t.Fatalf("file:\n%s", file)
	}
	if task := f.get("T-1"); len(task.Notes) != 15 || task.Notes[0].Text != "note 0" {
		t.Fatalf("T-1 has %d notes: %+v", len(task.Notes), task.Notes)
	}
	// A hand edit of a shown note is merged; the older ones stay.
	f.edit("@alice: note 14", "@alice: note 14, fixed by hand")
	if _, err := f.board.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	task := f.get("T-1")
	if len(task.Notes) != 15 || task.Notes[0].Text != "note 0" || task.Notes[14].Text != "note 14, fixed by hand" {
		t.Fatalf("after the hand edit: %+v", task.Notes)
	}
}

// With Coalesce (the server), a change returns once the file holds it,
// and changes made while a write runs share the next write.
func TestChangesAreWrittenBeforeTheyReturn(t *testing.T) {
	f := newFixture(t, board3)
	b, err := Open(f.ctx, f.db, Options{Path: f.path, Now: f.clock.Now, Coalesce: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := b.Update(f.ctx, "T-2", Change{Note: fmt.Sprintf("step %d", i)}, alice); err != nil {
			t.Fatal(err)
		}
		if got := f.readFile(); !strings.Contains(got, fmt.Sprintf("@alice: step %d\n", i)) {
			t.Fatalf("step %d returned before the file had it:\n%s", i, got)
		}
	}
	added, err := b.Add(f.ctx, "Added by an agent")
	if err != nil || !strings.Contains(f.readFile(), "- [ ] "+added.ID+" Added by an agent\n") {
		t.Fatalf("Add = %+v, %v; file:\n%s", added, err, f.readFile())
	}

	// Twenty agents at once: the first write is held until every change
	// is committed, so the second write takes all the others.
	const agents = 20
	ids := make([]string, agents)
	for i := range ids {
		task, err := b.Add(f.ctx, fmt.Sprintf("Task of agent %d", i))
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = task.ID
	}
	b.w.mu.Lock()
	before := b.w.gen
	b.w.mu.Unlock()
	writes := 0
	b.beforeWrite = func() {
		if writes++; writes == 1 {
			for {
				b.w.mu.Lock()
				all := b.w.gen >= before+agents
				b.w.mu.Unlock()
				if all {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	var wg sync.WaitGroup
	for i := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Update(f.ctx, ids[i], Change{Note: fmt.Sprintf("agent %d", i)}, alice); err != nil {
				t.Error(err)
				return
			}
			if got := f.readFile(); !strings.Contains(got, fmt.Sprintf("@alice: agent %d\n", i)) {
				t.Errorf("agent %d returned before the file had its note", i)
			}
		}()
	}
	wg.Wait()
	if writes != 2 {
		t.Errorf("%d changes made %d writes, want 2", agents, writes)
	}
	if err := b.Close(f.ctx); err != nil {
		t.Fatal(err)
	}
}
