package main

import (
	"context"
	"fmt"
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
	// warren's own writers may meet (this call's model record and the
	// tool-output record of the call itself are written by two writers):
	// what counts is that a write that waits for another process's lock
	// moves the counter.
	before := value(scrape(t, base, ""), "warren_sqlite_busy_retries_total")

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
	if v := value(scrape(t, base, ""), "warren_sqlite_busy_retries_total"); v < before+1 {
		t.Fatalf("a write that waited for the lock left warren_sqlite_busy_retries_total at %v (%v before)", v, before)
	}
}

// A write that waits the whole busy timeout for a lock another process
// holds fails with an error that says what is busy and that nothing was
// written, never SQLite's bare "database is locked"; and indeed nothing
// was: the task is not claimed, no usage was recorded.
func TestBusyDatabaseSaysWhatAndKeepsNothing(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	warren(t, "task", "add", "--data-dir", data, "Wait for me")
	c := serveStdio(t, "--data-dir", data)
	c.ok("usage_record", map[string]any{"model": "gpt-4o", "input_tokens": 1, "output_tokens": 1})

	ctx := context.Background()
	db, err := openDB(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"task_claim", map[string]any{"task_id": "T-1"}},
		{"usage_record", map[string]any{"model": "gpt-4o", "input_tokens": 5, "output_tokens": 5}},
	} {
		res := c.call(call.tool, call.args)
		text := textOf(res)
		if !res.IsError {
			t.Fatalf("%s succeeded while another process held the database's write lock: %s", call.tool, text)
		}
		for _, want := range []string{"the database is busy", "another process holds a write lock on " + data + "/warren.db",
			"nothing was changed", "retry"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: error %q does not say %q", call.tool, text, want)
			}
		}
	}
	if _, err := lock.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	var claims, usage int
	if err := db.QueryRow(`SELECT count(*) FROM task_claims`).Scan(&claims); err != nil {
		t.Fatal(err)
	}
	// The model records: the tool_output records of these calls (their
	// error texts were sent, and are metered) and of the first call are
	// written by warren's background writer once the lock is gone, whose
	// retry may come before or after this count.
	if err := db.QueryRow(`SELECT count(*) FROM usage_records WHERE kind = 'model'`).Scan(&usage); err != nil {
		t.Fatal(err)
	}
	if claims != 0 || usage != 1 {
		t.Fatalf("after the failed calls: %d claims, %d usage records; want 0 and 1 model record (nothing changed)", claims, usage)
	}
	task := c.ok("task_list", map[string]any{})
	if s := fmt.Sprint(task); !strings.Contains(s, "open") || strings.Contains(s, "in_progress") {
		t.Fatalf("the task changed: %v", task)
	}
	c.ok("task_claim", map[string]any{"task_id": "T-1"}) // and works once the lock is gone
}
