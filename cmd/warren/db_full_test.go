package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3"

	"github.com/warrenhq/warren/sessions/errs"
)

// Only a failure the disk explains becomes "the disk is full": the end of
// rows and an I/O error on a disk with room pass as they are, a busy
// database becomes "busy", and SQLite's codes stay findable in what is
// returned.
func TestFullDiskCheckLeavesOtherErrorsAlone(t *testing.T) {
	dir := t.TempDir() // a disk with more than a MiB free
	f := fullDisk{dir: dir}
	for _, err := range []error{io.EOF, sqlite3.IOERR_WRITE, errors.New("no such table: x")} {
		if got := f.check(err); got != err {
			t.Errorf("check(%v) = %v, want it unchanged", err, got)
		}
	}
	busy := f.check(fmt.Errorf("begin: %w", sqlite3.BUSY))
	if errs.CodeOf(busy) != errs.Busy || !errors.Is(busy, sqlite3.BUSY) ||
		!strings.Contains(busy.Error(), "the database is busy") || !strings.Contains(busy.Error(), "nothing was changed") {
		t.Errorf("check(SQLITE_BUSY) = %v (code %s)", busy, errs.CodeOf(busy))
	}
	if f.check(nil) != nil {
		t.Error("check(nil) is not nil")
	}
	full := f.check(fmt.Errorf("commit: %w", sqlite3.FULL))
	if errs.CodeOf(full) != errs.Unavailable || !errors.Is(full, sqlite3.FULL) ||
		!strings.Contains(full.Error(), "the disk holding warren's data directory "+dir+" is full") {
		t.Errorf("check(SQLITE_FULL) = %v (code %s)", full, errs.CodeOf(full))
	}
}
