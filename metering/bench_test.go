package metering

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/sessions/sqlschema/sqltest"
)

// benchRows is the size of the benchmark data set the issue asks for.
const benchRows = 1_000_000

// benchBatch is how many records each RecordBatch call (one transaction) writes.
const benchBatch = 10_000

var benchStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// benchGen produces a realistic synthetic workload: 90 days, 40 active sessions a day spread over
// 20 users, each session with one client, mostly one model and a task or two; a third of the
// records are tool output.
type benchGen struct {
	sessions, tasks []string
}

func newBenchGen() *benchGen {
	g := &benchGen{}
	for s := range 90 * 40 {
		g.sessions = append(g.sessions, fmt.Sprintf("sess-%05d", s))
	}
	for t := range 2000 {
		g.tasks = append(g.tasks, fmt.Sprintf("T-%d", t))
	}
	return g
}

var (
	benchUsers = func() (u []string) {
		for i := range 20 {
			u = append(u, fmt.Sprintf("user%02d", i))
		}
		return
	}()
	benchClients = []string{ClientCLI, ClientWeb, "claude-desktop", "cursor"}
	benchModels  = []string{"claude-sonnet-4-20250514", "gpt-4o", "gpt-4o-mini", "gpt-5", "local-llama"}
)

func (g *benchGen) record(i int) Record {
	const span = 90 * msPerDay
	ts := benchStart.UnixMilli() + int64(i)*(span/benchRows)
	day := int(dayOf(ts) - dayOf(benchStart.UnixMilli()))
	s := day*40 + i%40
	r := Record{
		Time:    time.UnixMilli(ts),
		User:    benchUsers[s%len(benchUsers)],
		Session: g.sessions[s],
		Client:  benchClients[s%len(benchClients)],
	}
	if s%5 != 0 {
		r.Task = g.tasks[(s/2+i%1000/500)%len(g.tasks)]
	}
	if i%3 == 0 {
		r.Kind, r.Tool, r.Bytes = KindToolOutput, "shell_exec", int64(200+i%4000)
		return r
	}
	r.Model = benchModels[(s+i%7/6)%len(benchModels)]
	r.InputTokens, r.OutputTokens, r.CachedTokens = int64(500+i%3000), int64(50+i%700), int64(i%2000)
	return r
}

// fill records n rows with RecordBatch in transactions of benchBatch.
func fill(tb testing.TB, m *Meter, n int) {
	tb.Helper()
	g := newBenchGen()
	batch := make([]Record, 0, benchBatch)
	for i := range n {
		batch = append(batch, g.record(i))
		if len(batch) == benchBatch || i == n-1 {
			if _, err := m.RecordBatch(context.Background(), batch); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// BenchmarkRecordBatch1M records 1,000,000 rows into a fresh database per iteration.
func BenchmarkRecordBatch1M(b *testing.B) {
	for range b.N {
		b.StopTimer()
		db, _ := openDB(b)
		m := mustOpen(b, db, Options{})
		b.StartTimer()
		fill(b, m, benchRows)
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// The report benchmark shares one 1M-row database, built once, across its b.N rounds.
var (
	benchOnce sync.Once
	benchDir  string
	benchDB   *sql.DB
	benchM    *Meter
)

func benchMeter(b *testing.B) *Meter {
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "metering-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchDir = dir
		benchDB, err = sql.Open("sqlite3", "file:"+filepath.Join(dir, "warren.db")+
			"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)&_pragma=foreign_keys(1)")
		if err != nil {
			b.Fatal(err)
		}
		benchM, err = Open(context.Background(), benchDB, Options{})
		if err != nil {
			b.Fatal(err)
		}
		fill(b, benchM, benchRows)
	})
	if benchM == nil {
		b.Fatal("benchmark database setup failed")
	}
	return benchM
}

// TestMain runs the tests on SQLite, then on PostgreSQL (sqltest).
func TestMain(m *testing.M) {
	defer func() {
		if benchDB != nil {
			benchDB.Close()
			os.RemoveAll(benchDir)
		}
	}()
	sqltest.Main(m, "")
}

// BenchmarkReport1M reports over 1,000,000 rows; ns/op is the time of one report.
func BenchmarkReport1M(b *testing.B) {
	m := benchMeter(b)
	cut1 := benchStart.Add(10*24*time.Hour + 7*time.Hour + 13*time.Minute)
	cut2 := benchStart.Add(80*24*time.Hour + 19*time.Hour)
	cases := []struct {
		name string
		q    ReportQuery
	}{
		{"all-users/day", ReportQuery{AllUsers: true, GroupBy: GroupDay}},
		{"all-users/day/partial-days", ReportQuery{AllUsers: true, GroupBy: GroupDay, Since: cut1, Until: cut2}},
		{"all-users/session", ReportQuery{AllUsers: true, GroupBy: GroupSession}},
		{"all-users/model", ReportQuery{AllUsers: true, GroupBy: GroupModel}},
		{"one-user/day", ReportQuery{User: "user07", GroupBy: GroupDay}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var rep *Report
			for b.Loop() {
				var err error
				if rep, err = m.Report(context.Background(), c.q); err != nil {
					b.Fatal(err)
				}
			}
			if c.q.AllUsers && c.q.Since.IsZero() && rep.Total.Records != benchRows {
				b.Fatalf("report covers %d records, want %d", rep.Total.Records, benchRows)
			}
		})
	}
}

// BenchmarkUsageRecordP50 records 500 billing records one by one, each
// acknowledged only once durable (what usage_record does), and reports
// the p50 and p95 of one Record. sqltest runs it on SQLite, then on
// PostgreSQL (set WARREN_TEST_PG_FSYNC=1 for a server that syncs its WAL
// as a real one does).
func BenchmarkUsageRecordP50(b *testing.B) {
	db, _ := openDB(b)
	m := mustOpen(b, db, Options{})
	ctx := context.Background()
	const ops = 500
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		for i := range ops {
			start := time.Now()
			if _, err := m.Record(ctx, Record{User: "bench", Session: fmt.Sprintf("s-%d", i%10), Model: "gpt-4o",
				InputTokens: 1000, OutputTokens: 100}); err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(start))
		}
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2])/1e6, "record-p50-ms")
	b.ReportMetric(float64(took[len(took)*95/100])/1e6, "record-p95-ms")
}
