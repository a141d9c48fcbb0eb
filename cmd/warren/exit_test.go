package main

import (
	"errors"
	"fmt"
	"strings"
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

// No error is printed without words: an error whose message is empty still
// gets a line that says what happened.
func TestPrintedErrorsAreNeverEmpty(t *testing.T) {
	for _, err := range []error{cli.Exit("", 1), cli.Exit("  ", 4), errors.New(""), fmt.Errorf("%w", errors.New(""))} {
		var b strings.Builder
		printError(&b, err)
		line := strings.TrimSpace(b.String())
		if !strings.HasPrefix(line, "warren: ") || len(line) < len("warren: ")+20 || !strings.Contains(line, "exit status") {
			t.Errorf("printError(%q) printed %q", err.Error(), b.String())
		}
	}
	var b strings.Builder
	printError(&b, cli.Exit("no model: pass --model NAME", 2))
	if b.String() != "warren: no model: pass --model NAME\n" {
		t.Errorf("a message is printed as it is: %q", b.String())
	}
}
