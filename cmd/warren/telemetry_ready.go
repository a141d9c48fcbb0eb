package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions/sqlschema"
)

// readyCheck is one readiness finding.
type readyCheck struct {
	name string
	err  error
}

// Disk is "full" below both of these: a server that cannot write a
// workspace or a database page is not ready for more work.
const (
	minFreeBytes = 256 << 20
	minFreeShare = 0.01
)

// jailProbe caches whether jails start: a probe starts one (tens of
// milliseconds), and a load balancer may ask every second.
var jailProbe struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

const jailProbeTTL = 30 * time.Second

// lastReady keeps the last readiness result for readyEvery: /readyz needs
// no token, and a flood of requests must not turn into a flood of write
// locks and jail starts.
var lastReady struct {
	mu     sync.Mutex
	at     time.Time
	checks []readyCheck
}

const readyEvery = time.Second

// readiness checks that the server can do its work: the database takes a
// write lock, a jail starts, the data directory's disk is not full. The
// result is reused for readyEvery.
func readiness(ctx context.Context, db *sql.DB, dir string) []readyCheck {
	lastReady.mu.Lock()
	defer lastReady.mu.Unlock()
	if !lastReady.at.IsZero() && time.Since(lastReady.at) < readyEvery {
		return lastReady.checks
	}
	lastReady.checks, lastReady.at = checkReady(ctx, db, dir), time.Now()
	return lastReady.checks
}

func checkReady(ctx context.Context, db *sql.DB, dir string) []readyCheck {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	dbCtx, dbCancel := context.WithTimeout(ctx, 2*time.Second) // a lock held longer is an outage
	checks := []readyCheck{{name: "database writable", err: dbWritable(dbCtx, db)}}
	dbCancel()

	if runnerReady.check != nil {
		checks = append(checks, readyCheck{name: runnerReady.name, err: runnerReady.check(ctx)})
		return append(checks, diskCheck(dir))
	}
	jailProbe.mu.Lock()
	if jailProbe.at.IsZero() || time.Since(jailProbe.at) > jailProbeTTL || jailProbe.err != nil {
		jailProbe.err, jailProbe.at = sandbox.Probe(ctx), time.Now()
	}
	checks = append(checks, readyCheck{name: "jails start", err: jailProbe.err})
	jailProbe.mu.Unlock()

	return append(checks, diskCheck(dir))
}

// runnerReady, when check is set, replaces the local jail's readiness
// check: a server whose sessions run elsewhere (--runner kubernetes, in
// an image without bwrap) checks what they need instead.
var runnerReady struct {
	name  string
	check func(ctx context.Context) error
}

func diskCheck(dir string) readyCheck {
	free, size, err := diskSpace(dir)
	if err == nil && free < minFreeBytes && float64(free) < minFreeShare*float64(size) {
		err = fmt.Errorf("only %d MiB free on the file system of %s: free some space", free>>20, dir)
	}
	return readyCheck{name: "disk not full", err: err}
}

// dbWritable takes the database's write lock and lets it go: it fails
// when the file is read-only, the disk refuses, the PostgreSQL server is
// a standby, or another process holds the lock longer than ctx allows.
// Nothing is written. A write transaction (sql.LevelSerializable) is
// BEGIN IMMEDIATE on SQLite and the advisory write lock on PostgreSQL
// (sqlschema).
func dbWritable(ctx context.Context, db *sql.DB) error {
	if sqlschema.DialectOf(db) == sqlschema.Postgres {
		var standby bool
		if err := db.QueryRowContext(ctx, "SELECT pg_is_in_recovery()").Scan(&standby); err != nil {
			return err
		}
		if standby {
			return errors.New("the PostgreSQL server is a read-only standby: point --database at the primary")
		}
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable})
	if err != nil {
		return err
	}
	return tx.Rollback()
}

// readyHandler answers /readyz: 200 when every check passes, 503 naming
// what failed otherwise.
func readyHandler(db *sql.DB, dir string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		code := http.StatusOK
		for _, c := range readiness(r.Context(), db, dir) {
			if c.err != nil {
				code = http.StatusServiceUnavailable
				fmt.Fprintf(&b, "fail %s: %v\n", c.name, c.err)
			} else {
				fmt.Fprintf(&b, "ok   %s\n", c.name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(b.String()))
	})
}
