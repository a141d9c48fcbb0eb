package mcp

import (
	"database/sql"
	"path/filepath"
	"testing"

	// The tests of this package open real SQLite databases.
	_ "github.com/ncruces/go-sqlite3/driver"
)

// openTestDB opens a fresh SQLite database in the test's directory.
func openTestDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "warren.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
