package metering

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/sessions/sqlschema/sqltest"
)

// openDB opens a real SQLite file the way cmd/warren does.
func openDB(tb testing.TB) (*sql.DB, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "warren.db")
	return openPath(tb, path), path
}

func openPath(tb testing.TB, path string) *sql.DB {
	tb.Helper()
	return sqltest.Open(tb, filepath.Dir(path))
}

// clock is an injectable, settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var t0 = time.Date(2026, 3, 10, 9, 30, 0, 0, time.UTC)

func mustOpen(tb testing.TB, db *sql.DB, opts Options) *Meter {
	tb.Helper()
	m, err := Open(context.Background(), db, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func mustRecord(tb testing.TB, m *Meter, r Record) []Alert {
	tb.Helper()
	alerts, err := m.Record(context.Background(), r)
	if err != nil {
		tb.Fatal(err)
	}
	return alerts
}

// rawTotals sums usage_records directly, bypassing the rollup, as the reference for reports.
func rawTotals(tb testing.TB, db *sql.DB, where string, args ...any) Totals {
	tb.Helper()
	var t Totals
	err := db.QueryRow(`SELECT COUNT(*), coalesce(SUM(input_tokens),0), coalesce(SUM(output_tokens),0),
		coalesce(SUM(cached_tokens),0), coalesce(SUM(tool_bytes),0), coalesce(SUM(tool_tokens),0),
		coalesce(SUM(cost_micros),0), coalesce(SUM(unpriced),0) FROM usage_records WHERE `+where, args...).
		Scan(&t.Records, &t.InputTokens, &t.OutputTokens, &t.CachedTokens, &t.ToolOutputBytes,
			&t.ToolOutputTokens, &t.CostMicros, &t.UnpricedRecords)
	if err != nil {
		tb.Fatal(err)
	}
	t.CostUSD = float64(t.CostMicros) / 1e6
	return t
}
