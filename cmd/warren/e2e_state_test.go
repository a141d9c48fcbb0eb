package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// heldLock is the database's write lock held by another process (a backup,
// the CLI, an operator's sqlite3 shell).
type heldLock struct {
	db   *sql.DB
	conn *sql.Conn
}

func holdWriteLock(t *testing.T, dataDir string) *heldLock {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dataDir, "warren.db")+"?_pragma=busy_timeout(10000)")
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
	l := &heldLock{db: db, conn: conn}
	t.Cleanup(l.release)
	return l
}

func (l *heldLock) release() {
	if l.conn == nil {
		return
	}
	_, _ = l.conn.ExecContext(context.Background(), "ROLLBACK")
	l.conn.Close()
	l.db.Close()
	l.conn = nil
}

// savedState reads session id's shell state as stored in the database.
func savedState(t *testing.T, dataDir, id string) (cwd string, env map[string]string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dataDir, "warren.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var raw string
	if err := db.QueryRow(`SELECT shell_state FROM sessions WHERE id = ?`, id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Cwd string            `json:"cwd"`
		Env map[string]string `json:"env"`
	}
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatal(err)
	}
	return st.Cwd, st.Env
}

// A cd and export whose database write is held up by a lock held from
// outside: the result says they are not saved yet, they are saved once the
// lock goes without another call, and they survive kill -9.
func TestShellStateHeldUpByALockedDatabaseIsSavedLater(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	srv := serveHTTP(t, "--data-dir", data, "--auth", "none")
	c := connectHTTP(t, srv, "")
	id := c.ok("session_create", map[string]any{"name": "locked"})["session_id"].(string)
	c.exec("mkdir sub", "session_id", id)

	lock := holdWriteLock(t, data)
	res := c.call("shell_exec", map[string]any{"command": "cd sub; export A=1", "session_id": id})
	if res.IsError {
		t.Fatalf("shell_exec with the database locked: %s", textOf(res))
	}
	got := structured(t, res)
	if got["state_saved"] != false || !strings.Contains(textOf(res), "not yet saved") {
		t.Fatalf("the result claims a state it could not keep: %v\n%s", got, textOf(res))
	}
	if got["cwd"] != "/workspace/sub" {
		t.Fatalf("cd sub: %v", got)
	}
	lock.release()

	// Saved in the background, without another call.
	deadline := time.Now().Add(20 * time.Second)
	for {
		cwd, env := savedState(t, data, id)
		if cwd == "/workspace/sub" && env["A"] == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the state was never saved after the lock went: cwd %q env %v", cwd, env)
		}
		time.Sleep(100 * time.Millisecond)
	}

	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	srv.cmd.Wait()
	srv2 := serveHTTP(t, "--data-dir", data, "--auth", "none")
	c2 := connectHTTP(t, srv2, "")
	if got := c2.exec(`pwd; echo "$A"`, "session_id", id); got["stdout"] != "/workspace/sub\n1\n" {
		t.Fatalf("after kill -9: %v", got)
	}
	if got := c2.exec("true", "session_id", id); got["state_saved"] != true {
		t.Fatalf("a command with the database free: %v", got)
	}
}

// A graceful stop writes the states it still holds before it exits.
func TestGracefulStopWritesStatesNotYetSaved(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	srv := serveHTTP(t, "--data-dir", data, "--auth", "none")
	c := connectHTTP(t, srv, "")
	id := c.ok("session_create", map[string]any{"name": "stopping"})["session_id"].(string)

	lock := holdWriteLock(t, data)
	if got := c.exec("mkdir -p sub && cd sub && export B=2", "session_id", id); got["state_saved"] != false {
		t.Fatalf("with the database locked: %v", got)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the server is stopping, still holding the state
	lock.release()
	exited := make(chan error, 1)
	go func() { exited <- srv.cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not exit after SIGTERM")
	}
	if cwd, env := savedState(t, data, id); cwd != "/workspace/sub" || env["B"] != "2" {
		t.Fatalf("after a graceful stop: cwd %q env %v", cwd, env)
	}
}
