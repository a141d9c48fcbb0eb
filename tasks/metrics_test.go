package tasks

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Claims are counted by result, and the lease collector sees a live and
// an expired claim in the database.
func TestClaimsAndLeasesAreCounted(t *testing.T) {
	f := newFixture(t, "- [ ] T-1 One\n- [ ] T-2 Two\n")
	count := func(result string) float64 { return testutil.ToFloat64(claims.WithLabelValues(result)) }
	okBefore, conflictBefore := count("ok"), count("conflict")

	f.clock.now = time.Now().Add(-time.Hour) // the collector reads the real clock
	if _, err := f.board.Claim(f.ctx, "T-2", bob, time.Minute); err != nil {
		t.Fatal(err)
	}
	f.clock.now = time.Now()
	if _, err := f.board.Claim(f.ctx, "T-1", alice, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := f.board.Claim(f.ctx, "T-1", bob, 0); !errors.Is(err, ErrClaimed) {
		t.Fatalf("bob claimed alice's live claim: %v", err)
	}
	if d := count("ok") - okBefore; d != 2 {
		t.Errorf("ok claims moved by %v, want 2", d)
	}
	if d := count("conflict") - conflictBefore; d != 1 {
		t.Errorf("conflicts moved by %v, want 1", d)
	}
	leases := LeaseCollector(f.db)
	if problems, err := testutil.CollectAndLint(leases); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	want := `
# HELP warren_tasks_leases Task claims in the database, by state: live, or expired (the holder stopped renewing and nobody took the task since).
# TYPE warren_tasks_leases gauge
warren_tasks_leases{state="expired"} 1
warren_tasks_leases{state="live"} 1
`
	if err := testutil.CollectAndCompare(leases, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
