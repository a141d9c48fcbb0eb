package sessions

import (
	"context"
	"strings"
	"testing"

	"github.com/warrenhq/warren/sessions/errs"
)

// TestSessionSourcesAreBounded: a client that names a megabyte source or
// git ref for a new session gets a short invalid error, and no session.
func TestSessionSourcesAreBounded(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	m := newManager(t, openDB(t, data), Config{DataDir: data})
	big := "https://example.com/" + strings.Repeat("r", 1<<20) + ".git"
	for _, opts := range []CreateOptions{{Source: big, Mode: "clone"}, {Ref: strings.Repeat("v", 1<<20)}} {
		_, err := m.Create(ctx, "alice", opts)
		if errs.CodeOf(err) != errs.Invalid || !strings.Contains(err.Error(), "at most") || len(err.Error()) > 1<<10 {
			t.Errorf("a megabyte source or ref: code %s, error of %d bytes: %.300v", errs.CodeOf(err), len(errString(err)), err)
		}
	}
	list, err := m.List(ctx, "alice", true)
	if err != nil || len(list) != 0 {
		t.Errorf("sessions after the refusals: %v %v", list, err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
