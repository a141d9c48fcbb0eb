package tasks

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestClaimRace has 20 goroutines, spread over four Boards sharing one
// database and file, claim the same task at once, round after round:
// exactly one must win and every loser must be told who did. Two of the
// Boards have a *sql.DB of their own, as two processes (or replicas on
// one PostgreSQL) would.
func TestClaimRace(t *testing.T) {
	f := newFixture(t, "# Race\n")
	own := func() *Board {
		b, err := Open(f.ctx, openDB(t, f.dir), Options{Path: f.path, Now: f.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	boards := []*Board{f.board, f.open(), own(), own()}
	const rounds, racers = 50, 20
	for round := range rounds {
		task, err := f.board.Add(f.ctx, fmt.Sprintf("Round %d", round))
		if err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		wins := make([]Holder, 0, 1)
		var mu sync.Mutex
		errs := make([]error, racers)
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := Holder{User: fmt.Sprintf("agent%d", i), Session: fmt.Sprintf("s-%d", i)}
				<-start
				_, err := boards[i%len(boards)].Claim(f.ctx, task.ID, h, time.Minute)
				if err == nil {
					mu.Lock()
					wins = append(wins, h)
					mu.Unlock()
				}
				errs[i] = err
			}()
		}
		close(start)
		wg.Wait()
		if len(wins) != 1 {
			t.Fatalf("round %d: %d winners: %v", round, len(wins), wins)
		}
		for _, err := range errs {
			if err == nil {
				continue
			}
			var ce *ClaimedError
			if !errors.As(err, &ce) || !errors.Is(err, ErrClaimed) || ce.Holder != wins[0] || ce.TaskID != task.ID {
				t.Fatalf("round %d: loser got %v, want a ClaimedError naming %v", round, err, wins[0])
			}
		}
		got := f.get(task.ID)
		if got.Claim == nil || got.Claim.Holder != wins[0] || got.Owner != wins[0].User || got.Status != StatusInProgress {
			t.Fatalf("round %d: task after the race = %+v", round, got)
		}
	}
	if !strings.Contains(f.readFile(), "[~] T-50 Round 49 @agent") {
		t.Fatalf("file does not show the last winner:\n%s", f.readFile())
	}
}

func TestLeaseExpiresAndIsRenewed(t *testing.T) {
	f := newFixture(t, "- [ ] T-1 One\n- [ ] T-2 Two\n")
	claimed, err := f.board.Claim(f.ctx, "T-1", alice, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	start := claimed.Claim.ClaimedAt

	// Claiming again as the same holder extends the lease, keeping its start.
	f.clock.Add(5 * time.Minute)
	again, err := f.board.Claim(f.ctx, "T-1", alice, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Claim.ClaimedAt.Equal(start) || !again.Claim.ExpiresAt.Equal(f.clock.Now().Add(10*time.Minute)) {
		t.Fatalf("re-claim = %+v", again.Claim)
	}
	f.clock.Add(9 * time.Minute)
	if _, err := f.board.Renew(f.ctx, "T-1", alice, 0); err != nil {
		t.Fatal(err)
	}
	if c := f.get("T-1").Claim; c == nil || !c.ExpiresAt.Equal(f.clock.Now().Add(DefaultLease)) {
		t.Fatalf("renewed claim = %+v", c)
	}
	if _, err := f.board.Claim(f.ctx, "T-1", bob, 0); !errors.Is(err, ErrClaimed) {
		t.Fatalf("bob claimed a live claim: %v", err)
	}

	// Once the lease runs out, anyone may take the task.
	f.clock.Add(DefaultLease)
	if task, ok, err := f.board.ClaimOf(f.ctx, alice.Session); err != nil || ok {
		t.Fatalf("ClaimOf after expiry = %+v, %v, %v", task, ok, err)
	}
	if f.get("T-1").Claim != nil {
		t.Fatal("an expired claim is still shown")
	}
	task, err := f.board.Claim(f.ctx, "T-1", bob, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if task.Owner != "bob" || task.Claim.Holder != bob {
		t.Fatalf("re-claimed task = %+v", task)
	}
	if _, err := f.board.Renew(f.ctx, "T-1", alice, 0); !errors.Is(err, ErrClaimed) {
		t.Fatalf("alice renewed bob's claim: %v", err)
	}
	// An expired claim nobody took can still be renewed by its holder.
	f.clock.Add(2 * time.Minute)
	if _, err := f.board.Renew(f.ctx, "T-1", bob, 0); err != nil {
		t.Fatalf("renew after expiry: %v", err)
	}
}

func TestReleaseSessionAndClaimOf(t *testing.T) {
	f := newFixture(t, "- [ ] T-1 One\n- [ ] T-2 Two\n- [ ] T-3 Three\n")
	other := newFixture(t, "- [ ] T-1 Elsewhere\n")
	otherBoard, err := Open(f.ctx, f.db, Options{Path: other.path, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.board.Claim(f.ctx, "T-1", alice, time.Hour); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(time.Second)
	if _, err := f.board.Claim(f.ctx, "T-2", alice, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := otherBoard.Claim(f.ctx, "T-1", alice, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := f.board.Claim(f.ctx, "T-3", bob, time.Hour); err != nil {
		t.Fatal(err)
	}
	task, ok, err := f.board.ClaimOf(f.ctx, alice.Session)
	if err != nil || !ok || task.ID != "T-2" || task.Claim.Holder != alice {
		t.Fatalf("ClaimOf = %+v, %v, %v; want the latest claim, T-2", task, ok, err)
	}
	n, err := f.board.ReleaseSession(f.ctx, alice.Session)
	if err != nil || n != 3 {
		t.Fatalf("ReleaseSession = %d, %v; want 3 claims on two boards", n, err)
	}
	if _, ok, _ := f.board.ClaimOf(f.ctx, alice.Session); ok {
		t.Fatal("alice's session still holds a claim")
	}
	for _, id := range []string{"T-1", "T-2"} {
		if _, err := f.board.Claim(f.ctx, id, bob, time.Hour); err != nil {
			t.Fatalf("claim %s after release: %v", id, err)
		}
	}
	if c := f.get("T-3").Claim; c == nil || c.Holder != bob {
		t.Fatalf("bob's own claim was released: %+v", c)
	}
}

func TestDoneReleasesTheClaim(t *testing.T) {
	f := newFixture(t, "- [ ] T-1 One\n")
	if _, err := f.board.Claim(f.ctx, "T-1", alice, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := f.board.Update(f.ctx, "T-1", Change{Status: StatusDone, Link: "abc1234"}, alice); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := f.board.ClaimOf(f.ctx, alice.Session); ok {
		t.Fatal("a done task is still claimed")
	}
	// Done by hand in the file releases the claim too.
	f.writeFile("- [ ] T-1 One @alice\n")
	if _, err := f.board.Claim(f.ctx, "T-1", alice, time.Hour); err != nil {
		t.Fatal(err)
	}
	f.edit("[~] T-1", "[x] T-1")
	if _, err := f.board.Sync(f.ctx); err != nil {
		t.Fatal(err)
	}
	if task := f.get("T-1"); task.Status != StatusDone || task.Claim != nil {
		t.Fatalf("task done by hand = %+v", task)
	}
}

// TestClaimNextGivesRacersDifferentTasks has ten claimers, over Boards
// with a *sql.DB each, ask for the next free task at once: each of the six
// open, unclaimed tasks goes to exactly one of them, lowest first, and the
// rest are told there is none left; a claimed or done task is never given.
func TestClaimNextGivesRacersDifferentTasks(t *testing.T) {
	f := newFixture(t, "# Next\n")
	for i := 1; i <= 8; i++ {
		if _, err := f.board.Add(f.ctx, fmt.Sprintf("Task %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	early := Holder{User: "early", Session: "s-early"}
	if _, err := f.board.Claim(f.ctx, "T-5", early, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := f.board.Update(f.ctx, "T-5", Change{Status: StatusDone}, early); err != nil {
		t.Fatal(err)
	}
	if _, err := f.board.Claim(f.ctx, "T-2", early, time.Minute); err != nil {
		t.Fatal(err)
	}
	own := func() *Board {
		b, err := Open(f.ctx, openDB(t, f.dir), Options{Path: f.path, Now: f.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	boards := []*Board{f.board, own(), own()}
	const racers = 10
	got := make([]Task, racers)
	errs := make([]error, racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			<-start
			got[i], errs[i] = boards[i%len(boards)].ClaimNext(f.ctx, Holder{User: fmt.Sprintf("agent%d", i), Session: fmt.Sprintf("s-%d", i)}, time.Minute)
		})
	}
	close(start)
	wg.Wait()
	won := map[string]string{}
	for i := range racers {
		switch {
		case errs[i] == nil:
			if other, dup := won[got[i].ID]; dup {
				t.Fatalf("%s given to both %s and agent%d", got[i].ID, other, i)
			}
			won[got[i].ID] = fmt.Sprintf("agent%d", i)
			if got[i].Claim == nil || got[i].Claim.Holder.User != fmt.Sprintf("agent%d", i) || got[i].Status != StatusInProgress {
				t.Fatalf("agent%d's task: %+v", i, got[i])
			}
		case ErrorCode(errs[i]) != CodeNotFound:
			t.Fatalf("agent%d: %v, want a claim or 'no open task'", i, errs[i])
		}
	}
	for _, id := range []string{"T-1", "T-3", "T-4", "T-6", "T-7", "T-8"} {
		if won[id] == "" {
			t.Errorf("%s was not given to anyone: %v", id, won)
		}
	}
	if len(won) != 6 {
		t.Fatalf("given: %v; want the six free tasks", won)
	}
	if c := f.get("T-2").Claim; c == nil || c.Holder != early {
		t.Fatalf("T-2's claim after the race: %+v", c)
	}
}
