package sqlschema

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	_ "github.com/ncruces/go-sqlite3/driver"
)

func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

var twoSteps = fstest.MapFS{
	"m/001_init.sql":  {Data: []byte("CREATE TABLE t (a INTEGER);")},
	"m/002_more.sql":  {Data: []byte("ALTER TABLE t ADD COLUMN b TEXT;")},
	"m/README":        {Data: []byte("not a migration")},
	"m/sub/x.sql.txt": {Data: []byte("")},
}

func TestMigrateAppliesInOrderOnceAndKeepsOtherComponents(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "w.db"))
	if err := Migrate(ctx, db, "other", fstest.MapFS{"m/001_o.sql": {Data: []byte("CREATE TABLE o (x);")}}, "m"); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second run is a no-op: ALTER TABLE would fail twice
		if err := Migrate(ctx, db, "mine", twoSteps, "m"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec("INSERT INTO t (a, b) VALUES (1, 'x')"); err != nil {
		t.Fatalf("both migrations should have run: %v", err)
	}
	for c, want := range map[string]int{"mine": 2, "other": 1} {
		if v, err := Version(ctx, db, c); err != nil || v != want {
			t.Errorf("version of %s = %d, %v; want %d", c, v, err, want)
		}
	}
}

// Two processes opening one new database at once: every migration runs
// exactly once (a second ALTER TABLE would fail).
func TestConcurrentOpenersApplyEachMigrationOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "w.db")
	// The file exists in WAL mode, as after openDB: switching a new file
	// to WAL from eight connections at once is not what is tested here.
	if err := openDB(t, path).Ping(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		db := openDB(t, path)
		wg.Go(func() { errs <- Migrate(ctx, db, "mine", twoSteps, "m") })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestMigrateRefusesWhatItCannotRead(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "w.db"))
	cases := []struct {
		name string
		fs   fstest.MapFS
		want string
	}{
		{"bad name", fstest.MapFS{"m/init.sql": {Data: []byte("")}}, "want a name like 001_what.sql"},
		{"duplicate number", fstest.MapFS{"m/001_a.sql": {}, "m/1_b.sql": {}}, "share the number 1"},
		{"broken sql", fstest.MapFS{"m/001_a.sql": {Data: []byte("CREATE TABLEX")}}, "apply 001_a.sql"},
	}
	for _, c := range cases {
		if err := Migrate(ctx, db, c.name, c.fs, "m"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	// A database written by a newer warren is not misread by this one.
	if err := Migrate(ctx, db, "mine", twoSteps, "m"); err != nil {
		t.Fatal(err)
	}
	older := fstest.MapFS{"m/001_init.sql": twoSteps["m/001_init.sql"]}
	if err := Migrate(ctx, db, "mine", older, "m"); err == nil || !strings.Contains(err.Error(), "newer than this warren") {
		t.Fatalf("an older build opening a newer database: %v", err)
	}
}
