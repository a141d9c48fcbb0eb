package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/sessions/sqlschema/sqltest"
)

// pgCount counts the rows of table in the PostgreSQL database at url.
func pgCount(t *testing.T, url, table string) int {
	t.Helper()
	return pgCountWhere(t, url, table, "true")
}

// pgCountWhere counts the rows of table that match where.
func pgCountWhere(t *testing.T, url, table, where string) int {
	t.Helper()
	db, err := sqltest.OpenURL(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM ` + table + ` WHERE ` + where).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The binary serving over HTTP with --database postgres://…: a token made
// by the CLI in PostgreSQL lets a client in, and a session, a command, a
// claim and a usage record all land in PostgreSQL, none in a warren.db.
func TestServeHTTPWithPostgres(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	url := sqltest.Shared(t).Fresh(t)
	tok := strings.TrimSpace(warren(t, "token", "create", "--user", "alice", "--data-dir", data, "--database", url))
	warren(t, "task", "add", "--data-dir", data, "--database", url, "Ship it")
	srv := serveHTTP(t, "--data-dir", data, "--database", url)
	c := connectHTTP(t, srv, tok)

	s := c.ok("session_create", map[string]any{"name": "pg"})
	id, _ := s["session_id"].(string)
	if id == "" {
		t.Fatalf("session_create: %v", s)
	}
	if out := c.exec("cd /tmp && export PGTEST=kept && echo hello", "session_id", id); !strings.Contains(out["stdout"].(string), "hello") {
		t.Fatalf("shell_exec: %v", out)
	}
	claim := c.ok("task_claim", map[string]any{"task_id": "T-1", "session_id": id})
	if claim["task"].(map[string]any)["claim"].(map[string]any)["session_id"] != id {
		t.Fatalf("task_claim: %v", claim)
	}
	c.ok("usage_record", map[string]any{"model": "gpt-4o", "input_tokens": 1000, "output_tokens": 10, "session_id": id})
	byTask := reportRows(t, c.ok("usage_report", map[string]any{"group_by": "task"}))
	if byTask["T-1"] == nil || byTask["T-1"]["input_tokens"] != 1000.0 {
		t.Fatalf("usage_report by task: %v", byTask)
	}
	for table, least := range map[string]int{"sessions": 1, "task_claims": 1, "usage_records": 2, "auth_tokens": 1} {
		if n := pgCount(t, url, table); n < least {
			t.Errorf("%s has %d rows in PostgreSQL, want at least %d", table, n, least)
		}
	}
	// The shell's state is saved in PostgreSQL: a second server finds it.
	other := connectHTTP(t, serveHTTP(t, "--data-dir", data, "--database", url), tok)
	if out := other.exec("pwd; echo $PGTEST", "session_id", id); out["stdout"] != "/tmp\nkept\n" {
		t.Fatalf("the second server's shell: %v", out)
	}
	// warren status reads the same database: the session, the live lease,
	// and the readiness checks pass (the database takes the write lock).
	status := warren(t, "status", "--data-dir", data, "--database", url)
	flat := strings.Join(strings.Fields(status), " ")
	for _, want := range []string{`warren_tasks_leases{state="live"} 1`, `warren_sessions{state="active"} 1`, "ok database writable"} {
		if !strings.Contains(flat, want) {
			t.Errorf("warren status on PostgreSQL lacks %q:\n%s", want, status)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "warren.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a warren.db was made beside --database: %v", err)
	}
}

// A data directory served on SQLite moves into PostgreSQL with `warren
// migrate`: every table's rows, reported by count; a second run refuses
// the non-empty target unless --replace; a server on PostgreSQL then
// shows the same board, claims, tokens and usage.
func TestMigrateSQLiteDataDirIntoPostgres(t *testing.T) {
	data := t.TempDir()
	agent := serveStdio(t, "--data-dir", data)
	agent.ok("task_add", map[string]any{"title": "Move me"})
	agent.ok("task_add", map[string]any{"title": "And me"})
	claim := agent.ok("task_claim", map[string]any{"task_id": "T-1"})
	session := claim["task"].(map[string]any)["claim"].(map[string]any)["session_id"].(string)
	agent.ok("usage_record", map[string]any{"model": "gpt-4o", "input_tokens": 1234, "output_tokens": 5})
	before := reportRows(t, agent.ok("usage_report", map[string]any{"group_by": "kind"}))
	agent.cs.Close()
	warren(t, "token", "create", "--user", "bob", "--data-dir", data)

	url := sqltest.Shared(t).Fresh(t)
	out := warren(t, "migrate", "--data-dir", data, "--from", "sqlite", "--to", url)
	for _, want := range []string{"tasks                       2 rows", "task_claims                 1 rows", "auth_tokens                 1 rows", "sessions                    1 rows"} {
		if !strings.Contains(out, want) {
			t.Errorf("migrate's report lacks %q:\n%s", want, out)
		}
	}
	if n := pgCount(t, url, "usage_records"); n < 4 {
		t.Errorf("usage_records: %d rows in PostgreSQL", n)
	}
	if msg := warrenFails(t, "migrate", "--data-dir", data, "--to", url); !strings.Contains(msg, "already has rows") {
		t.Fatalf("a second migrate into the filled database: %s", msg)
	}
	warren(t, "migrate", "--data-dir", data, "--to", url, "--replace")

	if ls := warren(t, "token", "ls", "--data-dir", data, "--database", url); !strings.Contains(ls, "bob") {
		t.Fatalf("token ls on PostgreSQL: %s", ls)
	}
	pg := serveStdio(t, "--data-dir", data, "--database", url)
	// The board and T-1's claim moved.
	list := fmt.Sprint(pg.ok("task_list", map[string]any{}))
	if !strings.Contains(list, "Move me") || !strings.Contains(list, "And me") || !strings.Contains(list, session) {
		t.Fatalf("task_list on PostgreSQL: %s", list)
	}
	// New ids continue after the copied ones.
	pg.ok("usage_record", map[string]any{"model": "gpt-4o", "input_tokens": 1, "output_tokens": 1})
	after := reportRows(t, pg.ok("usage_report", map[string]any{"group_by": "kind"}))
	if after["model"]["input_tokens"] != before["model"]["input_tokens"].(float64)+1 {
		t.Fatalf("model usage before %v, after %v", before["model"], after["model"])
	}
	if add := pg.ok("task_add", map[string]any{"title": "Third"}); add["task"].(map[string]any)["id"] != "T-3" {
		t.Fatalf("task_add after migrate: %v", add)
	}
}

// --database that is not a PostgreSQL URL, or a server that is not there:
// a clear error naming what to fix, never the URL's password.
func TestDatabaseFlagErrors(t *testing.T) {
	data := t.TempDir()
	msg := warrenFails(t, "token", "ls", "--data-dir", data, "--database", "mysql://x")
	if !strings.Contains(msg, "--database takes a postgres:// URL") {
		t.Fatalf("a mysql URL: %s", msg)
	}
	gone := "postgres://warren:s3cret@/nowhere?host=" + filepath.Join(data, "no-such-dir")
	msg = warrenFails(t, "token", "ls", "--data-dir", data, "--database", gone)
	if !strings.Contains(msg, `cannot reach the PostgreSQL database "nowhere"`) || strings.Contains(msg, "s3cret") {
		t.Fatalf("a server that is not there: %s", msg)
	}
}

// A usage record acknowledged by a server on PostgreSQL is in PostgreSQL:
// kill -9 of the server right after the last acknowledgement loses none.
func TestAcknowledgedUsageOnPostgresSurvivesKill9(t *testing.T) {
	data := t.TempDir()
	url := sqltest.Shared(t).Fresh(t)
	cmd := exec.Command(warrenBin, "serve", "stdio", "--data-dir", data, "--database", url)
	cmd.Stderr = newTestLog(t, "server: ")
	c := connect(t, &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second})
	const n = 20
	want := 0
	for i := range n {
		c.ok("usage_record", map[string]any{"model": "gpt-4o", "input_tokens": 100 + i, "output_tokens": 1})
		want += 100 + i
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	db, err := sqltest.OpenURL(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var records, tokens int
	if err := db.QueryRow(`SELECT count(*), COALESCE(sum(input_tokens), 0) FROM usage_records WHERE kind = 'model'`).Scan(&records, &tokens); err != nil {
		t.Fatal(err)
	}
	if records != n || tokens != want {
		t.Fatalf("after kill -9: %d model records with %d input tokens in PostgreSQL, want %d with %d", records, tokens, n, want)
	}
}

// PostgreSQL going away under a running server: a call that needs it
// fails with a clear error (nothing kept, retry), the server lives on,
// and once PostgreSQL is back the next call works, on new connections.
func TestPostgresAwayAndBack(t *testing.T) {
	s, err := sqltest.Start(os.TempDir()) // a server of its own: this test stops it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	url := s.Fresh(t)
	c := serveStdio(t, "--data-dir", t.TempDir(), "--database", url)
	rec := map[string]any{"model": "gpt-4o", "input_tokens": 10, "output_tokens": 1}
	c.ok("usage_record", rec)
	s.Down()
	c.fails("usage_record", rec, "cannot reach the PostgreSQL database")
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	c.ok("usage_record", rec)
	if n := pgCountWhere(t, url, "usage_records", "kind = 'model'"); n != 2 {
		t.Fatalf("%d model records in PostgreSQL, want the 2 acknowledged", n)
	}
}
