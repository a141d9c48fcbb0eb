package sessions

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// DataDirMarker is the file of a data directory that names it to the
// replicas sharing one database (shared_data_dir): replicas must share
// one data directory, since it holds what each replica reads of every
// session (its audit repository, the base of its diffs, and the clone
// its first content comes from).
const DataDirMarker = "replica-set-id"

// checkSharedDataDir makes sure dataDir is the data directory of the
// other replicas on db: the id in its marker (made now if it has none)
// must be the one the database recorded from the first replica's. A
// replica given a directory of its own (an emptyDir, a ReadWriteOnce
// volume of each pod) would otherwise serve sessions whose diffs and
// first content it cannot see, and write audit history nobody else
// reads.
func checkSharedDataDir(ctx context.Context, db *sql.DB, dataDir string) error {
	path := filepath.Join(dataDir, DataDirMarker)
	id, err := readMarker(path)
	if errors.Is(err, fs.ErrNotExist) {
		id, err = makeMarker(dataDir, path)
	}
	if err != nil {
		return fmt.Errorf("the data directory's replica-set marker %s: %w", path, err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO shared_data_dir (singleton, id, made_at) VALUES (1, ?, ?)
		ON CONFLICT (singleton) DO NOTHING`, id, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("record the replicas' data directory: %w", err)
	}
	var want string
	if err := db.QueryRowContext(ctx, `SELECT id FROM shared_data_dir WHERE singleton = 1`).Scan(&want); err != nil {
		return fmt.Errorf("read the replicas' data directory: %w", err)
	}
	if want != id {
		return fmt.Errorf("the data directory %s is not the one the other replicas on this database use "+
			"(its %s says %s, the database %s): replicas must share one data directory, mounted at the same path "+
			"on each (one ReadWriteMany volume; see docs/replicas.md). If this is that directory and its marker "+
			"was lost, write the database's id into it: echo %s > %s", dataDir, DataDirMarker, id, want, want, path)
	}
	return nil
}

// readMarker reads a marker's id, without following a link.
func readMarker(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 200))
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if id == "" || len(id) > 128 || !printable(id) {
		return "", fmt.Errorf("it holds no id (1 to 128 printable characters); delete it if this data directory is the first replica's, else write the database's id into it")
	}
	return id, nil
}

// makeMarker writes a new id into path unless another replica sharing
// the directory did first (then its id is the one): the whole file
// appears at once, by a link.
func makeMarker(dir, path string) (string, error) {
	tmp, err := os.CreateTemp(dir, "."+DataDirMarker+"-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	id := rand.Text()
	if _, err := tmp.WriteString(id + "\n"); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return readMarker(path)
	} else if err != nil {
		return "", err
	}
	return id, nil
}
