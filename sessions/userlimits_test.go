package sessions

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/warrenhq/warren/sandbox"
)

// TestShellsPerUserCap is issue 9 item 11 through the manager: each user
// may run Config.UserLimits.Jails shells at once; one more is refused with
// a message that says the count and how to stop one, another user is not
// affected, and pausing a session makes room.
func TestShellsPerUserCap(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, UserLimits: sandbox.UserLimits{Jails: 2}})
	t.Cleanup(func() { m.Close(ctx) })
	var ids []string
	for _, name := range []string{"one", "two", "three"} {
		s, err := m.Create(ctx, "ursula", CreateOptions{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	run(t, m, "ursula", ids[0], "true")
	run(t, m, "ursula", ids[1], "true")
	_, _, err := m.openCommand(ctx, "ursula", ids[2], "true")
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "you already run 2 shells, the limit per user is 2") ||
		!strings.Contains(err.Error(), "pause") {
		t.Fatalf("third shell of a user capped at 2: %v", err)
	}
	run(t, m, "ursula", ids[0], "true") // a running shell keeps working
	run(t, m, "victor", "", "true")     // another user is not counted with ursula

	if _, err := m.Pause(ctx, "ursula", ids[0]); err != nil {
		t.Fatal(err)
	}
	run(t, m, "ursula", ids[2], "true")
}
