package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
)

// rowsNaming counts, table by table (every table sqlite_master lists),
// the rows that hold id in a text column.
func rowsNaming(t *testing.T, db *sql.DB, id string) map[string]int {
	t.Helper()
	ctx := context.Background()
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	found := map[string]int{}
	for _, table := range tables {
		cols, err := db.QueryContext(ctx, `SELECT name, type FROM pragma_table_info(?)`, table)
		if err != nil {
			t.Fatal(err)
		}
		var conds []string
		for cols.Next() {
			var name, typ string
			if err := cols.Scan(&name, &typ); err != nil {
				t.Fatal(err)
			}
			if strings.EqualFold(typ, "TEXT") {
				conds = append(conds, fmt.Sprintf("instr(%q, ?1) > 0", name))
			}
		}
		cols.Close()
		if len(conds) == 0 {
			continue
		}
		var n int
		q := fmt.Sprintf("SELECT count(*) FROM %q WHERE %s", table, strings.Join(conds, " OR "))
		if err := db.QueryRowContext(ctx, q, id).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n > 0 {
			found[table] = n
		}
	}
	return found
}

// A deleted session leaves nothing of itself in the database but the usage
// records, which are billing data: no session row, no activity log, no
// network log. Another session's rows stay.
func TestDeletedSessionLeavesOnlyUsage(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	c := serveStdio(t, "--data-dir", data)
	id := c.ok("session_create", map[string]any{"name": "doomed"})["session_id"].(string)
	keep := c.ok("session_create", map[string]any{"name": "kept"})["session_id"].(string)
	for _, s := range []string{id, keep} {
		c.exec("echo hello; echo oops >&2", "session_id", s)
		c.ok("write_file", map[string]any{"session_id": s, "path": "f.txt", "content": "x"})
		c.ok("usage_record", map[string]any{"session_id": s, "model": "gpt-4o", "input_tokens": 10, "output_tokens": 5})
	}
	c.ok("session_control", map[string]any{"session_id": id, "action": "delete"})
	c.fails("shell_exec", map[string]any{"session_id": id, "command": "true"}, id)
	c.cs.Close() // the server exits, writing what it still held

	db, err := openDB(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	found := rowsNaming(t, db, id)
	for table, n := range found {
		if !strings.HasPrefix(table, "usage_") {
			t.Errorf("table %s still holds %d rows of the deleted session", table, n)
		}
	}
	if found["usage_records"] == 0 {
		t.Errorf("the deleted session's usage records are gone (rows naming it: %v)", found)
	}
	kept := rowsNaming(t, db, keep)
	for _, table := range []string{"sessions", "session_events", "usage_records"} {
		if kept[table] == 0 {
			t.Errorf("the other session lost its rows in %s (rows naming it: %v)", table, kept)
		}
	}
}

// A database from a version that kept deleted sessions as tombstones, and
// a session deleted with the CLI (which runs without the activity log),
// are cleaned when a server starts: their rows and logs go, their usage
// stays.
func TestOldTombstonesAreRemovedAtStart(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	c := serveStdio(t, "--data-dir", data)
	old := c.ok("session_create", map[string]any{"name": "tombstone"})["session_id"].(string)
	cli := c.ok("session_create", map[string]any{"name": "cli"})["session_id"].(string)
	for _, s := range []string{old, cli} {
		c.exec("echo hello", "session_id", s)
		c.ok("usage_record", map[string]any{"session_id": s, "model": "gpt-4o", "input_tokens": 10, "output_tokens": 5})
	}
	c.cs.Close()

	// What an older version left: the row in state deleted, its files gone.
	db, err := openDB(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE sessions SET state = 'deleted', default_key = NULL WHERE id = ?`, old); err != nil {
		t.Fatal(err)
	}
	db.Close()
	warren(t, "session", "rm", "--data-dir", data, cli)

	c = serveStdio(t, "--data-dir", data)
	c.ok("session_list", map[string]any{})
	c.cs.Close()

	db, err = openDB(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, id := range []string{old, cli} {
		found := rowsNaming(t, db, id)
		for table, n := range found {
			if !strings.HasPrefix(table, "usage_") {
				t.Errorf("session %s: table %s still holds %d rows", id, table, n)
			}
		}
		if found["usage_records"] == 0 {
			t.Errorf("session %s: its usage records are gone (rows naming it: %v)", id, found)
		}
	}
}
