package metering

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

var allGroups = []GroupBy{GroupSession, GroupTask, GroupClient, GroupModel, GroupDay, GroupUser, GroupKind}

// seed records n pseudo-random records for three users over ten days, at odd times of day so
// that report ranges cut through days.
func seed(t *testing.T, m *Meter, n int) []Record {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	users := []string{"ann", "bob", "cy"}
	models := []string{"gpt-4o", "claude-sonnet-4", "gpt-4o-mini", "local-llama", ""}
	clients := []string{ClientCLI, ClientWeb, "claude-desktop", "cursor"}
	var recs []Record
	for i := range n {
		u := users[rng.IntN(len(users))]
		r := Record{
			Time:    t0.Add(-time.Duration(rng.Int64N(int64(10 * 24 * time.Hour)))),
			User:    u,
			Session: fmt.Sprintf("%s-s%d", u, rng.IntN(4)),
			Client:  clients[rng.IntN(len(clients))],
		}
		if rng.IntN(3) > 0 {
			r.Task = fmt.Sprintf("T-%d", rng.IntN(5))
		}
		if i%3 == 0 {
			r.Kind, r.Tool, r.Bytes = KindToolOutput, "shell_exec", rng.Int64N(50000)
		} else {
			r.Model = models[rng.IntN(len(models))]
			r.InputTokens, r.OutputTokens, r.CachedTokens = rng.Int64N(20000), rng.Int64N(3000), rng.Int64N(8000)
		}
		recs = append(recs, r)
	}
	// Mixed single records and a batch exercise both write paths.
	for _, r := range recs[:50] {
		mustRecord(t, m, r)
	}
	if _, err := m.RecordBatch(context.Background(), recs[50:]); err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestReportsSumToRecordsEveryWay(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	m := mustOpen(t, db, Options{Now: newClock(t0).Now})
	seed(t, m, 2000)

	cut1 := t0.Add(-7*24*time.Hour - 3*time.Hour - 17*time.Minute)
	cut2 := t0.Add(-2*24*time.Hour + 5*time.Hour + 11*time.Second)
	sameDay1, sameDay2 := t0.Add(-5*24*time.Hour-4*time.Hour), t0.Add(-5*24*time.Hour-time.Hour)
	ranges := []struct {
		name         string
		since, until time.Time
	}{
		{"all time", time.Time{}, time.Time{}},
		{"since only", cut1, time.Time{}},
		{"until only", time.Time{}, cut2},
		{"both, cutting days", cut1, cut2},
		{"within one day", sameDay1, sameDay2},
		{"day aligned", time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC)},
	}
	for _, rg := range ranges {
		where, args := "ts >= ? AND ts < ?", []any{int64(-1 << 62), int64(1 << 62)}
		if !rg.since.IsZero() {
			args[0] = rg.since.UnixMilli()
		}
		if !rg.until.IsZero() {
			args[1] = rg.until.UnixMilli()
		}
		for _, scope := range []string{"ann", ""} {
			q := ReportQuery{User: scope, AllUsers: scope == "", Since: rg.since, Until: rg.until}
			w, a := where, args
			if scope != "" {
				w, a = "user_id = ? AND "+where, append([]any{scope}, args...)
			}
			want := rawTotals(t, db, w, a...)
			if want.Records == 0 {
				t.Fatalf("%s: fixture has no records in range", rg.name)
			}
			for _, g := range allGroups {
				q.GroupBy = g
				rep, err := m.Report(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				var sum Totals
				for _, r := range rep.Rows {
					sum.add(r.Totals)
				}
				if sum != want || rep.Total != want {
					t.Errorf("%s user=%q by %s: rows sum %+v, total %+v, want %+v", rg.name, scope, g, sum, rep.Total, want)
				}
			}
		}
	}
}

func TestReportGroupsAndScopes(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	m := mustOpen(t, db, Options{Now: newClock(t0).Now})
	mustRecord(t, m, Record{User: "ann", Session: "s1", Task: "T-1", Client: "cursor", Model: "gpt-4o", InputTokens: 100})
	mustRecord(t, m, Record{User: "ann", Session: "s1", Model: "mystery", OutputTokens: 5, Time: t0.Add(-24 * time.Hour)})
	mustRecord(t, m, Record{User: "bob", Session: "s9", Model: "gpt-4o", InputTokens: 7})

	rep, err := m.Report(ctx, ReportQuery{User: "ann", GroupBy: GroupDay})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 || rep.Rows[0].Key != "2026-03-09" || rep.Rows[1].Key != "2026-03-10" {
		t.Fatalf("day rows = %+v", rep.Rows)
	}
	if rep.Total.Records != 2 || rep.Total.UnpricedRecords != 1 || len(rep.UnpricedModels) != 1 || rep.UnpricedModels[0] != "mystery" {
		t.Fatalf("ann's report leaks or misses unpriced: %+v %v", rep.Total, rep.UnpricedModels)
	}
	rep, err = m.Report(ctx, ReportQuery{User: "ann", GroupBy: GroupTask})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 || rep.Rows[0].Key != "(no task)" || !rep.Rows[0].None || rep.Rows[1].Key != "T-1" || rep.Rows[1].None {
		t.Fatalf("task rows = %+v", rep.Rows)
	}
	rep, err = m.Report(ctx, ReportQuery{AllUsers: true, GroupBy: GroupUser})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 || rep.Total.Records != 3 {
		t.Fatalf("all users = %+v", rep.Rows)
	}

	for _, q := range []ReportQuery{
		{GroupBy: GroupDay},
		{User: "ann", GroupBy: "week"},
		{User: "ann", GroupBy: GroupDay, Since: t0, Until: t0.Add(-time.Hour)},
	} {
		if _, err := m.Report(ctx, q); !errors.Is(err, ErrInvalid) {
			t.Errorf("Report(%+v) err = %v, want ErrInvalid", q, err)
		}
	}
	if _, err := ParseGroupBy("model"); err != nil {
		t.Fatal(err)
	}
}

func TestReportCSVParsesBack(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	m := mustOpen(t, db, Options{Now: newClock(t0).Now})
	seed(t, m, 300)
	// Keys that need RFC 4180 quoting.
	mustRecord(t, m, Record{User: "ann", Session: "quote \"me\", please\nnewline", Model: "gpt-4o", InputTokens: 3})

	for _, g := range allGroups {
		rep, err := m.Report(ctx, ReportQuery{AllUsers: true, GroupBy: g})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := rep.Write(&buf, FormatCSV); err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(&buf).ReadAll()
		if err != nil {
			t.Fatalf("by %s: csv does not parse: %v", g, err)
		}
		if fmt.Sprint(recs[0]) != fmt.Sprint(CSVHeader(g)) || len(recs)-1 != len(rep.Rows) {
			t.Fatalf("by %s: header %v, %d rows for %d groups", g, recs[0], len(recs)-1, len(rep.Rows))
		}
		var sumMicros, sumRecords int64
		for i, rec := range recs[1:] {
			row := rep.Rows[i]
			if rec[0] != row.Key || rec[1] != strconv.FormatInt(row.Records, 10) ||
				rec[5] != strconv.FormatInt(row.ToolOutputBytes, 10) || rec[8] != strconv.FormatInt(row.UnpricedRecords, 10) {
				t.Fatalf("by %s: row %d = %q, want %+v", g, i, rec, row)
			}
			micros, err := strconv.ParseInt(rec[7][:len(rec[7])-7]+rec[7][len(rec[7])-6:], 10, 64)
			if err != nil || micros != row.CostMicros {
				t.Fatalf("by %s: cost %q does not match %d micro-dollars", g, rec[7], row.CostMicros)
			}
			n, _ := strconv.ParseInt(rec[1], 10, 64)
			sumRecords += n
			sumMicros += micros
		}
		if sumRecords != rep.Total.Records || sumMicros != rep.Total.CostMicros {
			t.Fatalf("by %s: csv sums %d records, %d µ$; total %+v", g, sumRecords, sumMicros, rep.Total)
		}
	}
}

func TestReportJSONRoundTrips(t *testing.T) {
	db, _ := openDB(t)
	m := mustOpen(t, db, Options{Now: newClock(t0).Now})
	seed(t, m, 200)
	rep, err := m.Report(context.Background(), ReportQuery{User: "bob", GroupBy: GroupModel, Since: t0.Add(-72 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rep.Write(&buf, ""); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Total != rep.Total || len(back.Rows) != len(rep.Rows) || back.Query.GroupBy != GroupModel || !back.Query.Since.Equal(rep.Query.Since) {
		t.Fatalf("json round trip: %+v vs %+v", back, rep)
	}
	if err := rep.Write(&buf, "xml"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("xml format err = %v", err)
	}
}

func TestFormatMicros(t *testing.T) {
	for v, want := range map[int64]string{0: "0.000000", 1: "0.000001", 1234567: "1.234567", -5: "-0.000005", 20_000_000: "20.000000"} {
		if got := formatMicros(v); got != want {
			t.Errorf("formatMicros(%d) = %q, want %q", v, got, want)
		}
	}
}
