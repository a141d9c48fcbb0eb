package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/warrenhq/warren/sessions/sqlschema/sqltest"
)

// int4Flags are the INTEGER columns that may stay 32-bit on PostgreSQL:
// 0 or 1 flags. Every other INTEGER of SQLite (times in milliseconds,
// byte and token counts, ids) must be a BIGINT there, or it overflows.
var int4Flags = map[string]bool{"session_events.console": true}

// Every store's migrations give the same tables and columns on SQLite and
// on PostgreSQL, and every 64-bit INTEGER of SQLite is a bigint on
// PostgreSQL: a PostgreSQL variant of a migration that forgot a column, or
// a new migration adding an INTEGER without its variant, fails here.
func TestSchemasMatchOnBothDatabases(t *testing.T) {
	ctx := context.Background()
	lite, err := openDB(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	pg, err := sqltest.OpenURL(ctx, sqltest.Shared(t).Fresh(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if err := migrateSchemas(ctx, lite); err != nil {
		t.Fatal(err)
	}
	if err := migrateSchemas(ctx, pg); err != nil {
		t.Fatal(err)
	}
	tables, err := sqliteTables(ctx, lite)
	if err != nil {
		t.Fatal(err)
	}
	liteCols := map[string]string{} // table.column → declared type
	for _, tb := range tables {
		rows, err := lite.QueryContext(ctx, `SELECT name, type FROM pragma_table_info(?)`, tb)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var name, typ string
			if err := rows.Scan(&name, &typ); err != nil {
				t.Fatal(err)
			}
			liteCols[tb+"."+name] = strings.ToUpper(typ)
		}
		rows.Close()
	}
	pgCols := map[string]string{}
	rows, err := pg.QueryContext(ctx, `SELECT table_name, column_name, data_type FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name <> 'schema_versions'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tb, name, typ string
		if err := rows.Scan(&tb, &name, &typ); err != nil {
			t.Fatal(err)
		}
		pgCols[tb+"."+name] = typ
	}
	rows.Close()
	var problems []string
	for col, lt := range liteCols {
		pt, ok := pgCols[col]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s (%s) is missing on PostgreSQL", col, lt))
		case lt == "INTEGER" && pt != "bigint" && !int4Flags[col]:
			problems = append(problems, fmt.Sprintf("%s is INTEGER on SQLite but %s on PostgreSQL: make it BIGINT in a .postgres.sql variant (or list a 0/1 flag in int4Flags)", col, pt))
		case lt == "TEXT" && pt != "text":
			problems = append(problems, fmt.Sprintf("%s is TEXT on SQLite but %s on PostgreSQL", col, pt))
		}
	}
	for col := range pgCols {
		if _, ok := liteCols[col]; !ok && col != "agent_chats.rowid" { // SQLite's implicit rowid, a column on PostgreSQL
			problems = append(problems, fmt.Sprintf("%s exists on PostgreSQL only", col))
		}
	}
	slices.Sort(problems)
	for _, p := range problems {
		t.Error(p)
	}
	if len(liteCols) < 50 {
		t.Fatalf("only %d columns compared: the schemas were not made", len(liteCols))
	}
}
