package mcp

import (
	"context"
	"database/sql"
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
		q.add(metering.Record{User: "alice", Kind: metering.KindToolOutput, Tool: "shell_exec", Bytes: 100})
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
