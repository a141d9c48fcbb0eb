package errs

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

type claimed struct{ holder string }

func (e *claimed) Error() string   { return "claimed by " + e.holder }
func (e *claimed) ErrorCode() Code { return Busy }

func TestCodeOfFindsTheCodeAnywhereInTheChain(t *testing.T) {
	errGone := New(NotFound, "thing not found")
	for _, c := range []struct {
		err  error
		want Code
	}{
		{nil, ""},
		{errors.New("disk on fire"), Internal},
		{errGone, NotFound},
		{fmt.Errorf("get thing: %w", errGone), NotFound},
		{fmt.Errorf("claim: %w", &claimed{"alice"}), Busy},
		{Wrap(Invalid, fs.ErrNotExist, "name: use letters"), Invalid},
		{fmt.Errorf("outer: %w", Wrap(Limit, errGone, "too many")), Limit},
	} {
		if got := CodeOf(c.err); got != c.want {
			t.Errorf("CodeOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// Wrap's message is the whole message, and the wrapped sentinel still
// matches: a refusal says its own words and is found by its cause.
func TestWrapKeepsTheMatchAndNotTheText(t *testing.T) {
	errBad := New(Invalid, "invalid workspace")
	err := fmt.Errorf("create: %w", Wrap(Invalid, errBad, "name must be short"))
	if got, want := err.Error(), "create: name must be short"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if !errors.Is(err, errBad) {
		t.Errorf("%v does not match its sentinel", err)
	}
	if errors.Is(err, New(Invalid, "invalid workspace")) {
		t.Errorf("%v matches another sentinel with the same code and text: sentinels match by identity", err)
	}
}
