package sqltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// BinDir is where Debian's postgresql-15 puts initdb and postgres
// (`apt-get install postgresql-15`; .ci/run and `just test-deps` do).
const BinDir = "/usr/lib/postgresql/15/bin"

// Server is a PostgreSQL server of the tests' own: a cluster in a
// temporary directory, reached over a Unix socket in it (no TCP port),
// trusting local connections as the superuser "warren".
type Server struct {
	dir     string // holds data/ and the socket
	port    string // names the socket file
	user    string
	cred    *syscall.Credential // whom initdb and postgres run as (root: postgres)
	cmd     *exec.Cmd
	done    chan struct{}
	Version string
}

// Start initdb's a cluster in a new directory below parent and starts its
// server. initdb and postgres refuse to run as root: as root they run as
// the user postgres (which the Debian package makes), owning the
// directory.
func Start(parent string) (*Server, error) {
	for _, b := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(BinDir, b)); err != nil {
			return nil, fmt.Errorf("PostgreSQL 15 is not installed (%v): run 'apt-get install -y postgresql-15' (just test-deps does)", err)
		}
	}
	dir, err := os.MkdirTemp(parent, "warren-pg-")
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, the PostgreSQL server needs the user postgres (made by the postgresql-15 package): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	s := &Server{dir: dir, port: "5432", user: "warren"}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(BinDir, "initdb"), "-D", data, "-U", s.user,
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	s.cred = cred
	if err := s.launch(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// launch starts the server on its cluster and waits until it takes
// connections.
func (s *Server) launch() error {
	var log bytes.Buffer
	args := []string{"-D", filepath.Join(s.dir, "data"), "-k", s.dir, "-p", s.port,
		"-c", "listen_addresses=", "-c", "shared_buffers=32MB", "-c", "max_connections=200"}
	if os.Getenv("WARREN_TEST_PG_FSYNC") == "" {
		// The tests' server loses nothing that matters in a crash of the
		// machine: the cluster is thrown away anyway. Benchmarks that
		// compare with SQLite's durable commits set WARREN_TEST_PG_FSYNC=1.
		args = append(args, "-c", "fsync=off", "-c", "full_page_writes=off")
	}
	s.cmd = exec.Command(filepath.Join(BinDir, "postgres"), args...)
	s.done = make(chan struct{})
	// Pdeathsig kills the server when the thread that started it ends
	// (the test binary dying): that thread is locked to a goroutine that
	// lives as long as the server, or the Go runtime could end it
	// earlier and take the server down mid-test.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	s.cmd.Stdout, s.cmd.Stderr = &log, &log
	started := make(chan error, 1)
	cmd, done := s.cmd, s.done
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the server
		err := cmd.Start()
		started <- err
		if err == nil {
			cmd.Wait() //nolint:errcheck // Stop says
		}
		close(done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		db, err := s.Open(ctx, "postgres")
		if err == nil {
			err = db.QueryRowContext(ctx, "SHOW server_version").Scan(&s.Version)
			db.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("postgres exited: %s", strings.TrimSpace(log.String()))
		case <-ctx.Done():
			s.halt()
			return fmt.Errorf("postgres did not accept connections within a minute: %v: %s", err, log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// halt shuts the server down (fast shutdown), keeping its cluster.
func (s *Server) halt() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGINT) //nolint:errcheck // it may be gone
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill() //nolint:errcheck // as above
			<-s.done
		}
	}
}

// Down stops the server and keeps its cluster, for a test of what warren
// does while its database is away; Up starts it again.
func (s *Server) Down() { s.halt() }

// Up starts a server stopped by Down.
func (s *Server) Up() error { return s.launch() }

// Stop shuts the server down (fast shutdown) and removes its directory.
func (s *Server) Stop() {
	s.halt()
	if err := os.RemoveAll(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(os.Stderr, "sqltest:", err)
	}
}
