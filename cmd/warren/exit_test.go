package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sessions"
)

// The exit status follows the error's code: input a user can correct
// exits 2 like a usage error, a refusal or a failure exits 1, and an
// explicit cli.Exit keeps its own status even when wrapped.
func TestExitStatusFollowsTheErrorCode(t *testing.T) {
	_, badQuery := metering.ParseReportQuery("colour", "", "")
	for _, c := range []struct {
		err  error
		want int
	}{
		{badQuery, 2},
		{fmt.Errorf("report: %w", badQuery), 2},
		{sessions.ErrNotFound, 1},
		{errors.New("disk on fire"), 1},
		{fmt.Errorf("run: %w", cli.Exit("the command exited with status 7", 7)), 7},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
