package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	sqlite3driver "github.com/ncruces/go-sqlite3/driver"
	"github.com/urfave/cli/v2"
)

// dataDirFlag is shared by every command that opens the database.
func dataDirFlag() cli.Flag {
	return &cli.StringFlag{
		Name:    "data-dir",
		EnvVars: []string{"WARREN_DATA_DIR"},
		Usage:   "where warren.db and the workspaces live (default $XDG_DATA_HOME/warren, else ~/.local/share/warren; /var/lib/warren for root)",
	}
}

// dataDir resolves --data-dir to an absolute directory and creates it.
func dataDir(c *cli.Context) (string, error) {
	dir := c.String("data-dir")
	if dir == "" && os.Geteuid() == 0 && os.Getenv("XDG_DATA_HOME") == "" {
		// root's home is 0700: jails, which run as another uid, could not
		// reach workspaces below it.
		dir = "/var/lib/warren"
	}
	if dir == "" {
		base := os.Getenv("XDG_DATA_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("find data dir: %w (pass --data-dir)", err)
			}
			base = filepath.Join(home, ".local", "share")
		}
		dir = filepath.Join(base, "warren")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("data dir: %w", err)
	}
	// 0711: other users cannot list it, but a jail running as another uid
	// (the server runs as root) can still reach its own workspace below.
	// The database itself is 0600.
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", fmt.Errorf("create data dir: %w", err)
	}
	return dir, nil
}

// openData resolves the data directory, reads its config file and opens
// its database: how every command that works on the data directory starts.
func openData(c *cli.Context) (dir string, cfg *config, db *sql.DB, err error) {
	if dir, err = dataDir(c); err != nil {
		return "", nil, nil, err
	}
	if cfg, err = loadConfig(c, dir); err != nil {
		return "", nil, nil, err
	}
	if db, err = openDatabase(c, dir); err != nil {
		return "", nil, nil, err
	}
	return dir, cfg, db, nil
}

// openDB opens <dir>/warren.db with WAL, a busy timeout and foreign keys.
// Each store applies its own migrations when it is built. Its errors on a
// full disk say so and name dir (db_full.go).
func openDB(ctx context.Context, dir string) (*sql.DB, error) {
	path := filepath.Join(dir, "warren.db")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)&_pragma=foreign_keys(1)" +
		// In WAL mode synchronous=normal cannot corrupt the database and
		// survives a crash of the process; only a power cut may lose the
		// last commits. It makes each commit (one per tool call) cheaper.
		"&_pragma=synchronous(normal)"
	conn, err := (&sqlite3driver.SQLite{}).OpenConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db := sql.OpenDB(fullDiskConnector{Connector: conn, disk: fullDisk{dir: dir}})
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// It holds token hashes and every session's state: owner only. SQLite
	// gives the -wal and -shm files the database's mode.
	if err := os.Chmod(path, 0o600); err != nil {
		db.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return db, nil
}
