package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A write that finds the database locked by another process waits for it,
// succeeds once the lock goes, and every wait is counted in
// warren_sqlite_busy_retries_total.
func TestBusyRetriesAreCounted(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	srv := serveHTTP(t, "--data-dir", data, "--auth", "none")
	base := strings.TrimSuffix(srv.url, "/mcp")
	c := connectHTTP(t, srv, "")
	c.ok("usage_record", map[string]any{"model": "gpt-4o", "input_tokens": 1, "output_tokens": 1})
	if v := value(scrape(t, base, ""), "warren_sqlite_busy_retries_total"); v != 0 {
		t.Fatalf("busy retries before any lock: %v", v)
	}

	db, err := openDB(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		lock.ExecContext(context.Background(), "ROLLBACK")
	}()
	c.ok("usage_record", map[string]any{"model": "gpt-4o", "input_tokens": 2, "output_tokens": 2})
	if v := value(scrape(t, base, ""), "warren_sqlite_busy_retries_total"); v < 1 {
		t.Fatalf("a write that waited for the lock left warren_sqlite_busy_retries_total at %v", v)
	}
}
