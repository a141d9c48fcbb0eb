package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/warrenhq/warren/sessions/errs"
)

// A connection that finds the database locked by another writer waits and
// retries, up to busyTimeout: what SQLite's busy_timeout does, with the
// same back-off, but through a handler of warren's own so that every
// retry is counted. Many retries mean writers queue on the one database:
// an operator sees it in warren_sqlite_busy_retries_total.

// busyTimeout is how long a statement waits for the database's lock.
const busyTimeout = 10 * time.Second

// busyDelays is SQLite's own schedule of waits (sqliteDefaultBusyCallback);
// past its end, every wait is its last value.
var busyDelays = []time.Duration{1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100}

// busyRetries counts the retries of every connection of this process.
var busyRetries = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "warren_sqlite_busy_retries_total",
	Help: "Times a database statement found the database locked by another writer and waited to retry.",
})

// busyWait is the connections' busy handler: count is how many times this
// statement has waited already. It reports whether to retry.
func busyWait(ctx context.Context, count int) bool {
	var waited time.Duration
	for i := range count {
		waited += busyDelay(i)
	}
	d := busyDelay(count)
	if waited+d > busyTimeout {
		d = busyTimeout - waited
	}
	if d <= 0 {
		return false
	}
	busyRetries.Inc()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func busyDelay(i int) time.Duration {
	return busyDelays[min(i, len(busyDelays)-1)] * time.Millisecond
}

// busy turns SQLite's bare "database is locked", which a statement
// returns once busyWait gives up, into a coded error (busy) that says what
// is busy and that the write did not happen: a statement that fails with
// SQLITE_BUSY changed nothing, and the transaction around it is rolled
// back by its caller. errors.Is still finds sqlite3.BUSY in it (sessions'
// state saver retries on it).
func (f fullDisk) busy(err error) error {
	var coded *errs.Error
	if errors.As(err, &coded) && coded.Code == errs.Busy {
		return err // said already, by a statement below
	}
	return errs.Wrap(errs.Busy, err, fmt.Sprintf(
		"the database is busy (another process holds a write lock on %s and kept it past %s): "+
			"nothing was changed; retry",
		filepath.Join(f.dir, "warren.db"), busyTimeout))
}
