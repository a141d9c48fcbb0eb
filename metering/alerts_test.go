package metering

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestThresholdFiresOncePerCrossing(t *testing.T) {
	db, path := openDB(t)
	ctx := context.Background()
	clk := newClock(t0)
	var logged []Alert
	opts := Options{
		Now:     clk.Now,
		OnAlert: func(a Alert) { logged = append(logged, a) },
		Thresholds: []Threshold{
			{Name: "daily-tokens", Scope: ScopeUser, Metric: MetricTokens, Period: PeriodDay, Limit: 1000},
			{Name: "session-cost", Scope: ScopeSession, Metric: MetricCost, Period: PeriodTotal, Limit: 0.01}, // 10,000 µ$
		},
	}
	m := mustOpen(t, db, opts)
	rec := Record{User: "ann", Session: "s1", Model: "gpt-4o", InputTokens: 400} // 1,000 µ$ each

	if a := mustRecord(t, m, rec); len(a) != 0 {
		t.Fatalf("fired below the limit: %+v", a)
	}
	mustRecord(t, m, rec)
	fired := mustRecord(t, m, rec) // 1,200 tokens today: crosses daily-tokens
	if len(fired) != 1 || fired[0].Threshold != "daily-tokens" || fired[0].Value != 1200 || fired[0].Limit != 1000 || fired[0].Day != "2026-03-10" {
		t.Fatalf("fired = %+v", fired)
	}
	if !strings.Contains(fired[0].Message, `user ann reached usage threshold "daily-tokens": 1200 tokens on 2026-03-10`) {
		t.Fatalf("message = %q", fired[0].Message)
	}
	for range 3 {
		if a := mustRecord(t, m, rec); len(a) != 0 {
			t.Fatalf("fired again on the same day: %+v", a)
		}
	}

	// A restart over the same file must not fire it again.
	m = mustOpen(t, openPath(t, path), opts)
	if a := mustRecord(t, m, rec); len(a) != 0 {
		t.Fatalf("fired again after restart: %+v", a)
	}

	// The next day is a new crossing for a daily threshold. 7 records so far: 7,000 µ$.
	clk.Add(24 * time.Hour)
	mustRecord(t, m, rec)
	mustRecord(t, m, rec)
	fired = mustRecord(t, m, rec) // 10,000 µ$ in total: crosses session-cost too
	if len(fired) != 2 || fired[0].Threshold != "daily-tokens" || fired[0].Day != "2026-03-11" ||
		fired[1].Threshold != "session-cost" || fired[1].Session != "s1" || fired[1].Value != 10000 {
		t.Fatalf("next day fired = %+v", fired)
	}
	// Another session has its own total.
	if a := mustRecord(t, m, Record{User: "ann", Session: "s2", Model: "gpt-4o", InputTokens: 10}); len(a) != 0 {
		t.Fatalf("s2 fired: %+v", a)
	}

	if len(logged) != 3 {
		t.Fatalf("OnAlert called %d times, want 3: %+v", len(logged), logged)
	}
	list, err := m.Alerts(ctx, "ann")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[0].Threshold != "session-cost" || list[2].Day != "2026-03-10" {
		t.Fatalf("Alerts = %+v", list)
	}
	if list, _ := m.Alerts(ctx, "bob"); len(list) != 0 {
		t.Fatalf("bob sees ann's alerts: %+v", list)
	}
	if all, _ := m.AllAlerts(ctx); len(all) != 3 {
		t.Fatalf("AllAlerts = %d", len(all))
	}
	if _, err := m.Alerts(ctx, ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Alerts without user: %v", err)
	}

	// Reports carry the alerts fired in their range.
	rep, err := m.Report(ctx, ReportQuery{User: "ann", GroupBy: GroupDay, Since: t0.Add(12 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Alerts) != 2 {
		t.Fatalf("report alerts = %+v", rep.Alerts)
	}
}

func TestBatchFiresOnce(t *testing.T) {
	db, _ := openDB(t)
	m := mustOpen(t, db, Options{Now: newClock(t0).Now, Thresholds: []Threshold{
		{Scope: ScopeSession, Metric: MetricToolOutputBytes, Period: PeriodTotal, Limit: 1000},
	}})
	batch := make([]Record, 10)
	for i := range batch {
		batch[i] = Record{User: "ann", Session: "s1", Kind: KindToolOutput, Bytes: 400}
	}
	fired, err := m.RecordBatch(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	if len(fired) != 1 || fired[0].Value != 4000 || fired[0].Threshold != "session-total-tool_output_bytes-1000" {
		t.Fatalf("fired = %+v", fired)
	}
}

func TestEnforcedBlocks(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	clk := newClock(t0)
	m := mustOpen(t, db, Options{Now: clk.Now, Thresholds: []Threshold{
		{Name: "s-budget", Scope: ScopeSession, User: "bob", Metric: MetricTokens, Period: PeriodTotal, Limit: 500, Enforce: true},
		{Name: "ann-daily", Scope: ScopeUser, User: "ann", Metric: MetricCost, Period: PeriodDay, Limit: 1, Enforce: true},
		{Name: "warn-only", Scope: ScopeUser, Metric: MetricTokens, Period: PeriodDay, Limit: 10},
	}})
	blocked := func(user, session string) bool {
		t.Helper()
		b, reason, err := m.Enforced(ctx, user, session)
		if err != nil {
			t.Fatal(err)
		}
		if b != (reason != "") {
			t.Fatalf("blocked=%v with reason %q", b, reason)
		}
		return b
	}

	mustRecord(t, m, Record{User: "bob", Session: "b1", Model: "gpt-4o", InputTokens: 100})
	if blocked("bob", "b1") {
		t.Fatal("warn-only threshold blocked")
	}
	mustRecord(t, m, Record{User: "bob", Session: "b1", Model: "gpt-4o", InputTokens: 400})
	if !blocked("bob", "b1") {
		t.Fatal("session budget reached but not blocked")
	}
	if blocked("bob", "b2") || blocked("ann", "b1") {
		t.Fatal("a session budget blocked another session or user")
	}

	// ann's daily cost: $1 = 1,000,000 µ$ = 100,000 output tokens of gpt-4o.
	mustRecord(t, m, Record{User: "ann", Session: "a1", Model: "gpt-4o", OutputTokens: 60_000})
	mustRecord(t, m, Record{User: "ann", Session: "a2", Model: "gpt-4o", OutputTokens: 40_000})
	_, reason, _ := m.Enforced(ctx, "ann", "a1")
	if !strings.Contains(reason, `"ann-daily": $1.000000 on 2026-03-10 (limit $1.000000)`) {
		t.Fatalf("reason = %q", reason)
	}
	if !blocked("ann", "a3") {
		t.Fatal("a user threshold must block every session of the user")
	}
	clk.Add(24 * time.Hour)
	if blocked("ann", "a1") {
		t.Fatal("a daily threshold still blocks the next day")
	}
	if _, _, err := m.Enforced(ctx, "", "x"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Enforced without user: %v", err)
	}
}

func TestEnforcedSeesThresholdAddedLater(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	m := mustOpen(t, db, Options{Now: newClock(t0).Now})
	mustRecord(t, m, Record{User: "ann", Session: "s1", Kind: KindToolOutput, Bytes: 5000})

	var logged int
	m = mustOpen(t, db, Options{Now: newClock(t0).Now, OnAlert: func(Alert) { logged++ }, Thresholds: []Threshold{
		{Scope: ScopeSession, Metric: MetricToolOutputTokens, Period: PeriodDay, Limit: 1000, Enforce: true},
	}})
	for range 2 {
		if b, _, err := m.Enforced(ctx, "ann", "s1"); err != nil || !b {
			t.Fatalf("blocked=%v err=%v", b, err)
		}
	}
	if logged != 1 {
		t.Fatalf("alert logged %d times", logged)
	}
}

func TestThresholdValidation(t *testing.T) {
	db, _ := openDB(t)
	bad := []Threshold{
		{Scope: "team", Metric: MetricTokens, Period: PeriodDay, Limit: 1},
		{Scope: ScopeUser, Metric: "dollars", Period: PeriodDay, Limit: 1},
		{Scope: ScopeUser, Metric: MetricTokens, Period: "week", Limit: 1},
		{Scope: ScopeUser, Metric: MetricTokens, Period: PeriodDay, Limit: 0},
		{Scope: ScopeUser, Session: "s1", Metric: MetricTokens, Period: PeriodDay, Limit: 1},
	}
	for _, th := range bad {
		if _, err := Open(context.Background(), db, Options{Thresholds: []Threshold{th}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("threshold %+v: err = %v", th, err)
		}
	}
	dup := Threshold{Name: "x", Scope: ScopeUser, Metric: MetricTokens, Period: PeriodDay, Limit: 1}
	if _, err := Open(context.Background(), db, Options{Thresholds: []Threshold{dup, dup}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("duplicate names: err = %v", err)
	}
}

func TestConcurrentWritersFireOnce(t *testing.T) {
	db, path := openDB(t)
	ctx := context.Background()
	opts := Options{Now: newClock(t0).Now, Thresholds: []Threshold{
		{Name: "t", Scope: ScopeUser, Metric: MetricTokens, Period: PeriodDay, Limit: 1000},
	}}
	// Two Meters on two connection pools stand in for two warren processes sharing the file.
	meters := []*Meter{mustOpen(t, db, opts), mustOpen(t, openPath(t, path), opts)}
	var fired atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				a, err := meters[g%2].Record(ctx, Record{User: "ann", Session: "s", Model: "gpt-4o", InputTokens: 10})
				if err != nil {
					t.Error(err)
					return
				}
				fired.Add(int64(len(a)))
			}
		}()
	}
	wg.Wait()
	if n := fired.Load(); n != 1 {
		t.Fatalf("fired %d times, want 1", n)
	}
	if got := rawTotals(t, db, "1 = 1"); got.InputTokens != 2000 {
		t.Fatalf("recorded %d tokens", got.InputTokens)
	}
}
