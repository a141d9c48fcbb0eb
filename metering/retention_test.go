package metering

import (
	"context"
	"testing"
	"time"
)

func TestPurgeDeletesExactlyExpired(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	clk := newClock(t0)
	m := mustOpen(t, db, Options{Now: clk.Now, Retention: 30 * 24 * time.Hour, Thresholds: []Threshold{
		{Name: "daily", Scope: ScopeUser, Metric: MetricTokens, Period: PeriodDay, Limit: 1},
		{Name: "total", Scope: ScopeUser, Metric: MetricTokens, Period: PeriodTotal, Limit: 1},
	}})
	cutoff := t0.Add(-30 * 24 * time.Hour) // 2026-02-08 09:30, mid-day on purpose
	ages := []time.Duration{
		-40 * 24 * time.Hour, -31 * 24 * time.Hour,
		-time.Millisecond, // 1 ms too old
		0,                 // exactly at the cutoff: kept
		time.Hour,         // later the same day as the cutoff: kept
		2 * 24 * time.Hour, 25 * 24 * time.Hour,
	}
	for i, d := range ages {
		mustRecord(t, m, Record{Time: cutoff.Add(d), User: "ann", Session: "s", Model: "gpt-4o", InputTokens: int64(10 + i)})
		mustRecord(t, m, Record{Time: cutoff.Add(d), User: "bob", Kind: KindToolOutput, Bytes: 100})
	}
	n, err := m.Purge(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 6 {
		t.Fatalf("purged %d, want 6", n)
	}
	if got := rawTotals(t, db, "ts < ?", cutoff.UnixMilli()); got.Records != 0 {
		t.Fatalf("%d expired records survive", got.Records)
	}
	want := rawTotals(t, db, "1 = 1")
	if want.Records != 8 || want.InputTokens != 13+14+15+16 {
		t.Fatalf("kept %+v", want)
	}
	// The rollup must agree with what is left, including the day the cutoff cut in two.
	for _, g := range allGroups {
		rep, err := m.Report(ctx, ReportQuery{AllUsers: true, GroupBy: g})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Total != want {
			t.Fatalf("by %s after purge: %+v, want %+v", g, rep.Total, want)
		}
	}
	// Daily alerts for purged days go; the total alert stays so it cannot fire twice.
	alerts, _ := m.Alerts(ctx, "ann")
	for _, a := range alerts {
		if a.Period == PeriodDay && a.Day < "2026-02-08" {
			t.Fatalf("alert for a purged day survives: %+v", a)
		}
	}
	if alerts[len(alerts)-1].Threshold != "total" {
		t.Fatalf("total alert purged: %+v", alerts)
	}
	if n, _ := m.Purge(ctx); n != 0 {
		t.Fatalf("second purge deleted %d", n)
	}
}

func TestPurgeKeepsForeverWhenDisabled(t *testing.T) {
	db, _ := openDB(t)
	m := mustOpen(t, db, Options{Now: newClock(t0).Now, Retention: -1})
	mustRecord(t, m, Record{Time: t0.AddDate(-5, 0, 0), User: "ann", Model: "gpt-4o"})
	if n, err := m.Purge(context.Background()); err != nil || n != 0 {
		t.Fatalf("purged %d, %v", n, err)
	}
}

func TestPurgeDefaultRetention(t *testing.T) {
	db, _ := openDB(t)
	m := mustOpen(t, db, Options{Now: newClock(t0).Now})
	mustRecord(t, m, Record{Time: t0.Add(-DefaultRetention - time.Second), User: "ann"})
	mustRecord(t, m, Record{Time: t0.Add(-DefaultRetention + time.Second), User: "ann"})
	if n, err := m.Purge(context.Background()); err != nil || n != 1 {
		t.Fatalf("purged %d, %v", n, err)
	}
}

func TestRunRetentionPurgesAtStartAndPeriodically(t *testing.T) {
	db, _ := openDB(t)
	clk := newClock(t0)
	runs := make(chan int64, 10)
	m := mustOpen(t, db, Options{
		Now: clk.Now, Retention: time.Hour, PurgeInterval: 20 * time.Millisecond,
		OnPurge: func(n int64, err error) {
			if err != nil {
				t.Error(err)
			}
			runs <- n
		},
	})
	mustRecord(t, m, Record{Time: t0.Add(-2 * time.Hour), User: "ann"})
	mustRecord(t, m, Record{Time: t0, User: "ann"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.RunRetention(ctx); close(done) }()

	if n := <-runs; n != 1 {
		t.Fatalf("first run purged %d", n)
	}
	clk.Add(2 * time.Hour)
	for n := <-runs; n == 0; n = <-runs {
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("RunRetention did not stop")
	}
}
