package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/sessions/workspace"
)

// A session manager's refusal of its own input (a name, an action, a
// network mode) is about the session, not its workspace: the message says
// what is wrong without the "invalid workspace:" of workspace errors, and
// callers still tell it apart by its code (and, as before, ErrInvalid).
func TestSessionInputErrorsDoNotBlameTheWorkspace(t *testing.T) {
	ctx := context.Background()
	m, s := aliceSession(t)
	_, nameErr := m.Create(ctx, "alice", CreateOptions{Name: strings.Repeat("n", 101)})
	_, actionErr := m.Control(ctx, "alice", s.ID, "explode")
	_, netErr := m.Create(ctx, "alice", CreateOptions{Network: &Network{Mode: NetNone, Allow: []string{"npm"}}})
	_, modeErr := m.Create(ctx, "alice", CreateOptions{Network: &Network{Mode: "wide"}})
	for _, c := range []struct {
		err  error
		want string
	}{
		{nameErr, "name must be at most 100 printable characters"},
		{actionErr, `action "explode": use pause, resume, archive or delete`},
		{netErr, "network mode none takes no allowlist: use mode allowlist"},
		{modeErr, `network mode "wide": use none, allowlist or host`},
	} {
		if c.err == nil || c.err.Error() != c.want {
			t.Errorf("error %q, want %q", c.err, c.want)
		}
		if errs.CodeOf(c.err) != errs.Invalid || !errors.Is(c.err, workspace.ErrInvalid) {
			t.Errorf("%q: code %q, want %q (and errors.Is ErrInvalid)", c.err, errs.CodeOf(c.err), errs.Invalid)
		}
	}
}

// Each kind of refusal carries the code a caller switches on.
func TestSessionErrorsCarryCodes(t *testing.T) {
	ctx := context.Background()
	m, s := aliceSession(t)
	_, notFound := m.Get(ctx, "bob", s.ID)
	_, paused := m.Pause(ctx, "alice", s.ID)
	_, again := m.Pause(ctx, "alice", s.ID)
	for _, c := range []struct {
		err  error
		want errs.Code
	}{
		{notFound, errs.NotFound},
		{paused, ""},
		{again, errs.Conflict},
		{busy(s.ID, "pause"), errs.Busy},
		{limitf("too many"), errs.Limit},
		{&NotSavedError{}, errs.Unavailable},
		{fmt.Errorf("diff: %w", workspace.ErrNoBase), errs.Conflict},
	} {
		if got := errs.CodeOf(c.err); got != c.want {
			t.Errorf("%v: code %q, want %q", c.err, got, c.want)
		}
	}
	if !errors.Is(notFound, ErrNotFound) || !errors.Is(again, ErrInvalidTransition) {
		t.Errorf("sentinels no longer match: %v, %v", notFound, again)
	}
}

// aliceSession is a manager with one empty session of alice's.
func aliceSession(t *testing.T) (*Manager, *Session) {
	t.Helper()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data})
	s, err := m.Create(context.Background(), "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}
