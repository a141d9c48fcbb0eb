package metering

import (
	"bytes"
	"context"
	"encoding/csv"
	"testing"
	"time"
)

// Usage a client could only estimate (its model server sent none) is
// marked, and every report says how much of its total is estimated: from
// the records (part of a day) and from the daily rollup (whole days), and
// after retention rebuilt the rollup.
func TestReportsSayHowMuchIsEstimated(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	clk := newClock(t0)
	m := mustOpen(t, db, Options{Now: clk.Now, Retention: 48 * time.Hour})
	mustRecord(t, m, Record{User: "ann", Session: "s1", Model: "gpt-4o", InputTokens: 1000, OutputTokens: 100})
	mustRecord(t, m, Record{User: "ann", Session: "s1", Model: "local", InputTokens: 300, OutputTokens: 20, Estimated: true})
	mustRecord(t, m, Record{User: "ann", Session: "s2", Model: "local", InputTokens: 50, OutputTokens: 5, CachedTokens: 7, Estimated: true})
	if _, err := m.Record(ctx, Record{User: "ann", Kind: KindToolOutput, Tool: "read_file", Bytes: 10, Estimated: true}); err == nil {
		t.Error("a tool-output record was marked estimated: its tokens are always an estimate of bytes")
	}
	check := func(what string, q ReportQuery) {
		t.Helper()
		rep, err := m.Report(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Total.EstimatedRecords != 2 || rep.Total.EstimatedTokens != 382 {
			t.Errorf("%s: estimated %d records, %d tokens; want 2 and 382", what, rep.Total.EstimatedRecords, rep.Total.EstimatedTokens)
		}
		for _, r := range rep.Rows {
			if r.Key == "s1" && (r.EstimatedRecords != 1 || r.EstimatedTokens != 320) {
				t.Errorf("%s: s1 estimated %d, %d", what, r.EstimatedRecords, r.EstimatedTokens)
			}
		}
	}
	check("records", ReportQuery{User: "ann", GroupBy: GroupSession, Since: t0.Add(-time.Hour), Until: t0.Add(time.Hour)})
	check("rollup", ReportQuery{User: "ann", GroupBy: GroupSession})
	clk.Add(30 * time.Hour) // retention rebuilds the rollup of the cutoff day from the records
	if _, err := m.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	check("after purge", ReportQuery{User: "ann", GroupBy: GroupSession})

	rep, _ := m.Report(ctx, ReportQuery{User: "ann", GroupBy: GroupSession})
	var b bytes.Buffer
	if err := rep.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	rows, _ := csv.NewReader(&b).ReadAll()
	if h := rows[0]; h[len(h)-3] != "estimated_records" || h[len(h)-2] != "estimated_tokens" {
		t.Errorf("csv header %v", h)
	}
}
