package metering_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver"

	"github.com/warrenhq/warren/metering"
)

func Example() {
	dir, _ := os.MkdirTemp("", "metering-example-")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite3", "file:"+filepath.Join(dir, "warren.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)")
	defer db.Close()
	ctx := context.Background()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

	m, err := metering.Open(ctx, db, metering.Options{
		Now: func() time.Time { return now },
		Thresholds: []metering.Threshold{
			{Name: "session-budget", Scope: metering.ScopeSession, Metric: metering.MetricCost,
				Period: metering.PeriodTotal, Limit: 0.05, Enforce: true},
		},
		OnAlert: func(a metering.Alert) { fmt.Println("warning:", a.Message) },
	})
	if err != nil {
		panic(err)
	}
	// An external agent reports its tokens; the server records a tool result it sent.
	m.Record(ctx, metering.Record{User: "ann", Session: "s1", Task: "T-7", Client: "cursor",
		Model: "gpt-4o", InputTokens: 12_000, OutputTokens: 2_500})
	m.RecordToolOutput(ctx, "ann", "s1", "T-7", "cursor", "shell_exec", 4096)

	blocked, reason, _ := m.Enforced(ctx, "ann", "s1")
	fmt.Println("blocked:", blocked, reason != "")

	rep, _ := m.Report(ctx, metering.ReportQuery{User: "ann", GroupBy: metering.GroupTask})
	rep.Write(os.Stdout, metering.FormatCSV)
	// Output:
	// warning: session s1 of user ann reached usage threshold "session-budget": $0.055000 in total (limit $0.050000)
	// blocked: true true
	// task,records,input_tokens,output_tokens,cached_tokens,tool_output_bytes,tool_output_tokens,cost_usd,unpriced_records,estimated_records,estimated_tokens,network_bytes
	// T-7,2,12000,2500,0,4096,1024,0.055000,0,0,0,0
}
