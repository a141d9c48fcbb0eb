package tasks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Issue 21, item 6: notes acknowledged to agents were lost while a person
// edited TASKS.md by hand and syncs ran. These tests put a hand edit and a
// change between every two steps of a sync and check that no acknowledged
// note goes missing, from the database or from the file.

const raceBoard = "# Board\n\n- [ ] T-1 One\n- [ ] T-2 Two\n- [ ] T-3 Three\n- [ ] T-4 Four\n- [ ] T-5 Five\n- [ ] T-6 Six\n"

// person edits the file as people do: reads it, changes a line, and saves
// it later, in place (most editors) or through a temporary file renamed
// over it (vim, many others).
type person struct {
	t      testing.TB
	path   string
	read   string
	rename bool
}

func (p *person) open() {
	p.t.Helper()
	data, err := os.ReadFile(p.path)
	if err != nil {
		p.t.Fatal(err)
	}
	p.read = string(data)
}

// save writes what was read with the title of task T-(k%6+1) changed.
func (p *person) save(k int) {
	p.t.Helper()
	p.saveTask(k%6+1, k)
}

// saveTask writes what was read with task n's title changed (edit k).
func (p *person) saveTask(n, k int) {
	p.t.Helper()
	old := fmt.Sprintf("T-%d ", n)
	i := strings.Index(p.read, old)
	if i < 0 {
		p.t.Fatalf("the person's copy has no %q:\n%s", old, p.read)
	}
	eol := strings.IndexByte(p.read[i:], '\n')
	// A title that the person types: a new word before the end of line.
	edited := p.read[:i+eol] + fmt.Sprintf(" edit%d", k) + p.read[i+eol:]
	if !p.rename {
		if err := os.WriteFile(p.path, []byte(edited), 0o644); err != nil {
			p.t.Fatal(err)
		}
		return
	}
	tmp := filepath.Join(filepath.Dir(p.path), ".TASKS.md.swp")
	if err := os.WriteFile(tmp, []byte(edited), 0o644); err != nil {
		p.t.Fatal(err)
	}
	if err := os.Rename(tmp, p.path); err != nil {
		p.t.Fatal(err)
	}
}

// acked is a note whose change the board acknowledged.
type acked struct {
	task string
	text string
}

// checkNotes fails unless every acknowledged note is on the board and in
// the file.
func checkNotes(t testing.TB, ctx context.Context, b *Board, notes []acked, what string) {
	t.Helper()
	tasks, err := b.List(ctx, Filter{})
	if err != nil {
		t.Fatalf("%s: list: %v", what, err)
	}
	onBoard := map[string]bool{}
	for _, task := range tasks {
		for _, n := range task.Notes {
			onBoard[task.ID+" "+n.Text] = true
		}
	}
	data, err := os.ReadFile(b.path)
	if err != nil {
		t.Fatal(err)
	}
	file := string(data)
	lost := 0
	for _, n := range notes {
		inFile := strings.Contains(file, "@agent: "+n.text+"\n")
		if !onBoard[n.task+" "+n.text] || !inFile {
			lost++
			t.Errorf("%s: note %q of %s: on the board %v, in the file %v", what, n.text, n.task, onBoard[n.task+" "+n.text], inFile)
		}
	}
	if lost > 0 {
		t.Logf("%s: %d of %d acknowledged notes lost; file:\n%s", what, lost, len(notes), file)
	}
}

// TestHandEditBetweenSyncSteps runs two rounds of writes with a person who
// opens the file at one step of the first and saves it at the same step
// or at one of the next (up to a whole round later), in place and by
// rename, while an agent's note is recorded at every step. A round is a
// whole sync (warren task sync), or the server's way: a note through the
// API, whose write rewrites only that task's lines, then the background
// save of the sync base. Every acknowledged note must survive, in the
// database and in the file.
func TestHandEditBetweenSyncSteps(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openDB(t, dir)
	clk := newClock()
	agent := Holder{User: "agent", Session: "s-agent"}
	type mode struct {
		name     string
		coalesce time.Duration
		round    func(b *Board, notes *[]acked) error
	}
	modes := []mode{
		{"sync", 0, func(b *Board, _ *[]acked) error {
			_, err := b.Sync(ctx)
			return err
		}},
		{"server", time.Hour, func(b *Board, notes *[]acked) error {
			text := fmt.Sprintf("api note %d", len(*notes))
			_, err := b.Update(ctx, "T-6", Change{Note: text}, agent)
			if err == nil {
				*notes = append(*notes, acked{"T-6", text})
			}
			b.background(ctx, true)
			return err
		}},
	}
	scenarios := 0
	for _, m := range modes {
		open := func(name string) *Board {
			scenarios++
			path := filepath.Join(dir, fmt.Sprint(scenarios), "TASKS.md")
			os.MkdirAll(filepath.Dir(path), 0o755)
			os.WriteFile(path, []byte(raceBoard), 0o644)
			b, err := Open(ctx, db, Options{Path: path, Now: clk.Now, Coalesce: m.coalesce})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close(ctx) })
			// The person's saves here are whole before the next step:
			// no need to wait for them to settle (see readSettled).
			b.settle = 0
			if _, err := b.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			return b
		}
		// The steps of one round, counted on a round with a note
		// recorded at each step and no hand edit.
		steps := 0
		{
			b := open("count")
			var notes []acked
			if err := m.round(b, &notes); err != nil {
				t.Fatal(err)
			}
			b.setStep(func(string) {
				steps++
				if _, _, err := b.changeOnce(ctx, 1, func(_ context.Context, e *edit) error {
					e.note = &Note{At: e.now.Truncate(60e9), By: agent.User, Text: fmt.Sprint("count ", steps)}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			})
			if err := m.round(b, &notes); err != nil {
				t.Fatal(err)
			}
			b.setStep(nil)
		}
		for _, rename := range []bool{false, true} {
			for r := 0; r < steps; r++ {
				for w := r; w <= r+steps; w++ {
					name := fmt.Sprintf("%s rename=%v open@%d save@%d", m.name, rename, r, w)
					b := open(name)
					p := &person{t: t, path: b.path, rename: rename}
					var notes []acked
					at, saved := 0, false
					b.setStep(func(step string) {
						k := at
						at++
						// An agent's note, committed at this step.
						n := k%5 + 1
						text := fmt.Sprintf("ack %d at %s", k, step)
						if _, _, err := b.changeOnce(ctx, n, func(_ context.Context, e *edit) error {
							e.note = &Note{At: e.now.Truncate(60e9), By: agent.User, Text: text}
							return nil
						}); err == nil {
							notes = append(notes, acked{taskID(n), text})
						} else if !errors.Is(err, errInConflict) {
							t.Fatalf("%s: note at %s: %v", name, step, err)
						}
						if k == r {
							p.open()
						}
						if k == w {
							p.save(k)
							saved = true
						}
					})
					for range 2 {
						if err := m.round(b, &notes); err != nil && !errors.Is(err, ErrConflict) {
							t.Fatalf("%s: round: %v", name, err)
						}
					}
					b.setStep(nil)
					if !saved {
						p.save(at) // after both rounds: some take fewer steps
					}
					if _, err := b.Sync(ctx); err != nil {
						t.Errorf("%s: last sync: %v", name, err)
					}
					checkNotes(t, ctx, b, notes, name)
					if t.Failed() {
						return
					}
				}
			}
		}
		t.Logf("%s: rounds of %d steps", m.name, steps)
	}
	t.Logf("%d interleavings", scenarios)
}

// TestHandEditsOfNotes: a note typed into the file is added, a note whose
// text is changed by hand is changed, and a note deleted from the file
// comes back, because a copy of the file saved from before the note was
// written looks the same as a deletion.
func TestHandEditsOfNotes(t *testing.T) {
	f := newFixture(t, board3)
	for _, text := range []string{"first", "second"} {
		if _, err := f.board.Update(f.ctx, "T-1", Change{Note: text}, alice); err != nil {
			t.Fatal(err)
		}
	}
	f.edit("  - 2026-05-06 10:00 @alice: first\n", "")
	f.edit("@alice: second\n", "@alice: second, typo fixed\n  - 2026-05-06 11:00 @carol: typed by hand\n")
	if _, err := f.board.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range f.get("T-1").Notes {
		got = append(got, n.By+": "+n.Text)
	}
	want := []string{"alice: first", "alice: second, typo fixed", "carol: typed by hand"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("notes = %q, want %q", got, want)
	}
	file := f.readFile()
	if !strings.Contains(file, "- [ ] T-1 One\n  - 2026-05-06 10:00 @alice: first\n  - 2026-05-06 10:00 @alice: second, typo fixed\n  - 2026-05-06 11:00 @carol: typed by hand\n") {
		t.Fatalf("file:\n%s", file)
	}
}

// TestNotesSurviveHandEditsAndSyncs is the race as it was seen: agents
// adding notes through the board's API in a server (writes coalesced),
// a person editing TASKS.md by hand (in place and by rename, saving a
// copy read a moment before), and `warren task sync` in another process
// (another Board on the same database). No acknowledged note may be lost.
func TestNotesSurviveHandEditsAndSyncs(t *testing.T) {
	const (
		agents   = 4
		perAgent = 25
		tasks    = 40
		edits    = 60
	)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "docs", "TASKS.md")
	os.MkdirAll(filepath.Dir(path), 0o755)
	var sb strings.Builder
	sb.WriteString("# Board\n\n")
	for n := 1; n <= tasks; n++ {
		fmt.Fprintf(&sb, "- [ ] T-%d Task %d\n", n, n)
	}
	os.WriteFile(path, []byte(sb.String()), 0o644)
	db := openDB(t, dir)
	server, err := Open(ctx, db, Options{Path: path, Coalesce: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := Open(ctx, db, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	var (
		mu    sync.Mutex
		notes []acked
		wg    sync.WaitGroup
		done  = make(chan struct{})
	)
	for a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := Holder{User: "agent", Session: fmt.Sprintf("s-%d", a)}
			for i := range perAgent {
				id := taskID((a*perAgent+i)%tasks + 1)
				text := fmt.Sprintf("agent %d note %d", a, i)
				_, err := server.Update(ctx, id, Change{Note: text}, h)
				switch {
				case err == nil, errors.Is(err, ErrNotWritten):
					// Acknowledged: saved on the board.
					mu.Lock()
					notes = append(notes, acked{id, text})
					mu.Unlock()
				case errors.Is(err, ErrConflict):
					// Refused, so not acknowledged.
				default:
					t.Errorf("update %s: %v", id, err)
					return
				}
			}
		}()
	}
	var others sync.WaitGroup
	others.Add(2)
	go func() { // the person
		defer others.Done()
		rnd := rand.New(rand.NewPCG(uint64(seed), 1))
		for k := range edits {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Duration(rnd.IntN(3000)) * time.Microsecond) // reading, typing
			p := &person{t: t, path: path, read: string(data), rename: rnd.IntN(2) == 0}
			p.saveTask(rnd.IntN(tasks)+1, k) // any task's title
		}
	}()
	go func() { // warren task sync, now and then
		defer others.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(3 * time.Millisecond):
			}
			// A sync may give up on a file that kept changing under it
			// (this person saves every millisecond or two): it says so.
			if _, err := cli.Sync(ctx); err != nil && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNotWritten) &&
				!strings.Contains(err.Error(), "kept changing") {
				t.Errorf("task sync: %v", err)
				return
			}
		}
	}()
	wg.Wait()
	close(done)
	others.Wait()
	if err := server.Close(ctx); err != nil && !errors.Is(err, ErrConflict) {
		t.Fatal(err)
	}
	if _, err := cli.Sync(ctx); err != nil {
		t.Fatalf("last sync: %v", err)
	}
	if len(notes) < agents*perAgent/2 {
		t.Fatalf("only %d of %d notes were acknowledged", len(notes), agents*perAgent)
	}
	checkNotes(t, ctx, cli, notes, "after the race")
	t.Logf("%d notes acknowledged, %d hand edits", len(notes), edits)
}
