package mcp

import (
	"encoding/json"
	"slices"
	"strings"

	"context"
	"database/sql"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenhq/warren/metering"
)

// A batch the database refuses (here: another process holds the write lock
// past the busy timeout) is retried until it is written, not dropped.
func TestUsageQueueRetriesARefusedBatch(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "warren.db")
	open := func(busyMS int) *sql.DB {
		db, err := sql.Open("sqlite3", "file:"+path+"?_pragma=journal_mode(wal)&_pragma=busy_timeout("+strconv.Itoa(busyMS)+")")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db := open(50)
	meter, err := metering.Open(ctx, db, metering.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := newUsageQueue(meter, func(context.Context, string) string { return "" }, zerolog.Nop())
	defer q.close()

	// Another connection takes the write lock and holds it well past the
	// queue's busy timeout.
	locker, err := open(50).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		q.add(metering.Record{User: "alice", Kind: metering.KindToolOutput, Tool: "shell_exec", Bytes: 100}, nil)
	}
	time.Sleep(400 * time.Millisecond) // the first attempts fail
	if _, err := locker.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	locker.Close()
	q.flush()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM usage_records WHERE kind = 'tool_output'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("%d of 3 records written after the lock was released", n)
	}
}

// Each tool_output record holds the size of its result's JSON encoding,
// whether the writer measured it or, with too much waiting, the call did.
func TestUsageQueueRecordsResultSizes(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "warren.db")+"?_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	meter, err := metering.Open(ctx, db, metering.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := newUsageQueue(meter, func(context.Context, string) string { return "" }, zerolog.Nop())
	defer q.close()
	var want []int64
	for i, n := range []int{0, 100, maxHeld / 3, maxHeld / 3, 5000} { // the two big ones pass maxHeld
		text := strings.Repeat("é<\"\n", n/5)
		res := mcpgo.NewToolResultStructured(ShellResult{SessionID: "s", Stdout: text, ExitCode: i}, text)
		b, _ := json.Marshal(res)
		want = append(want, int64(len(b)))
		q.add(metering.Record{User: "alice", Kind: metering.KindToolOutput, Tool: "shell_exec"}, res)
	}
	q.flush()
	rows, err := db.Query(`SELECT tool_bytes FROM usage_records WHERE kind = 'tool_output' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []int64
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("recorded sizes %v, want the results' JSON sizes %v", got, want)
	}
}

// A tool_output record counts the bytes of the result as the transport
// sends it (json.Marshal of the result), HTML-escaped characters, text
// that needs escaping and structured content included.
func TestResultSizeIsTheEncodedSize(t *testing.T) {
	for _, res := range []*mcpgo.CallToolResult{
		mcpgo.NewToolResultText("plain"),
		mcpgo.NewToolResultText("<a href=\"x\">&amp;</a>\n\ttabs \u2028 é \x00"),
		mcpgo.NewToolResultStructured(ReadFileOutput{Path: "/workspace/<x>.txt", Content: "a\nb & c\n", Encoding: "utf-8", TotalLines: 2}, "a\nb & c\n"),
		mcpgo.NewToolResultError("failed: <nothing>"),
	} {
		want, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if got := resultSize(res); got != int64(len(want)) {
			t.Errorf("resultSize = %d, the encoded result is %d bytes: %s", got, len(want), want)
		}
	}
}
