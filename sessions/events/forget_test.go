package events

import (
	"context"
	"path/filepath"
	"testing"
)

func countRows(t *testing.T, l *Log, session string) int {
	t.Helper()
	var n int
	if err := l.db.QueryRow(`SELECT count(*) FROM session_events WHERE session_id = ?`, session).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A forgotten session's log is gone from the table and from memory, what
// is appended for it later is not kept (not even after the writer ran),
// and other sessions keep theirs. Sweep forgets the logs of sessions that
// no longer exist, and only those.
func TestForgetRemovesALogForGood(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "warren.db"))
	l := openLog(t, db, 0)
	for _, s := range []string{"s-gone", "s-kept", "s-orphan"} {
		l.Append(Event{Session: s, Kind: KindCall, Tool: "shell_exec", Summary: "echo"})
	}
	l.flush()
	l.Append(Event{Session: "s-gone", Kind: KindOutput, Text: "pending"})
	if err := l.Forget(ctx, "s-gone"); err != nil {
		t.Fatal(err)
	}
	l.Append(Event{Session: "s-gone", Kind: KindResult, Summary: "deleted"})
	l.flush()
	if n := countRows(t, l, "s-gone"); n != 0 {
		t.Fatalf("%d rows of a forgotten session", n)
	}
	if evs := after(t, l, "s-gone", 0); len(evs) != 0 {
		t.Fatalf("a forgotten session still reads %d events", len(evs))
	}
	n, err := l.Sweep(ctx, func(_ context.Context, s string) (bool, error) { return s != "s-orphan", nil })
	if err != nil || n != 1 {
		t.Fatalf("sweep removed %d logs (%v), want 1", n, err)
	}
	if countRows(t, l, "s-orphan") != 0 || countRows(t, l, "s-kept") != 1 {
		t.Fatalf("after the sweep: orphan %d rows, kept %d rows; want 0 and 1",
			countRows(t, l, "s-orphan"), countRows(t, l, "s-kept"))
	}
}
