package sessions

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// Default sessions are sessions like any other: they count against the
// per-user cap, and replacing an archived default makes a new one that
// counts too.
func TestDefaultSessionsCountAgainstTheCap(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, MaxSessionsPerUser: 2})

	first, err := m.Get(ctx, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "alice", CreateOptions{Name: "second"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "alice", CreateOptions{Name: "third"}); !errors.Is(err, ErrLimit) {
		t.Fatalf("a third session with a cap of 2 (one of them the default): %v", err)
	}
	// An archived default still counts; its replacement would be the third.
	if _, err := m.Archive(ctx, "alice", first.ID); err != nil {
		t.Fatal(err)
	}
	if s, err := m.Get(ctx, "alice", ""); !errors.Is(err, ErrLimit) {
		t.Fatalf("a new default beyond the cap of 2: %v %v", s, err)
	}
	n, err := m.Store().Count(ctx, "alice")
	if err != nil || n != 2 {
		t.Fatalf("alice has %d sessions with a cap of 2: %v", n, err)
	}
	// Another user is not affected, and deleting one makes room again.
	if _, err := m.Get(ctx, "bob", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Delete(ctx, "alice", first.ID); err != nil {
		t.Fatal(err)
	}
	if s, err := m.Get(ctx, "alice", ""); err != nil || s.ID == first.ID {
		t.Fatalf("a new default after a delete: %v %v", s, err)
	}
}

// lockDB holds the database's write lock from another connection, as
// another process (the CLI, a backup) can, until the returned func runs.
func lockDB(t *testing.T, dir string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "warren.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		conn.Close()
		db.Close()
	}
	t.Cleanup(release)
	return release
}

// One user's insert waiting for the database must not stall another
// user's calls: the manager's lock is never held across database I/O.
func TestAnotherUsersSlowInsertDoesNotStallGet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		create func(m *Manager) error
	}{
		{"default session", func(m *Manager) error { _, err := m.Get(context.Background(), "alice", ""); return err }},
		{"session_create", func(m *Manager) error {
			_, err := m.Create(context.Background(), "alice", CreateOptions{})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			data := jailData(t)
			// A busy timeout long enough that alice's insert is still waiting
			// whenever bob's call is judged.
			db, err := sql.Open("sqlite3", "file:"+filepath.Join(data, "warren.db")+
				"?_pragma=busy_timeout(20000)&_pragma=journal_mode(wal)")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			m := newManager(t, db, Config{DataDir: data, MaxSessionsPerUser: 10})
			bobs, err := m.Create(ctx, "bob", CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			release := lockDB(t, data)
			alice := make(chan error, 1)
			go func() { alice <- tc.create(m) }()
			// Let alice reach her insert (it cannot finish before release).
			time.Sleep(300 * time.Millisecond)

			type answer struct {
				err  error
				took time.Duration
			}
			bob := make(chan answer, 1)
			go func() {
				// Past the cache's recheck, so that bob's call reads the database too.
				time.Sleep(recheck)
				start := time.Now()
				_, _, err := m.OpenFiles(ctx, "bob", bobs.ID, false)
				bob <- answer{err, time.Since(start)}
			}()
			select {
			case a := <-bob:
				if a.err != nil {
					t.Fatalf("bob's read: %v", a.err)
				}
				t.Logf("bob's call answered in %v while alice's insert waited", a.took)
			case err := <-alice:
				t.Fatalf("alice's call ended (%v) before bob's read answered: bob waited for her insert", err)
			}
			select {
			case err := <-alice:
				t.Fatalf("alice's call ended while the database was locked: %v", err)
			default:
			}
			release()
			if err := <-alice; err != nil {
				t.Fatalf("alice's call after the lock was released: %v", err)
			}
		})
	}
}
