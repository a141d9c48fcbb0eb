package events

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenhq/warren/sessions/sqlschema/sqltest"
)

// TestMain runs the tests on SQLite, then on PostgreSQL (sqltest).
func TestMain(m *testing.M) { sqltest.Main(m, "") }

// openDB opens the database of path's directory: SQLite, then PostgreSQL.
func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	return sqltest.Open(t, filepath.Dir(path))
}

func openLog(t *testing.T, db *sql.DB, max int) *Log {
	t.Helper()
	l, err := Open(context.Background(), db, Options{MaxEvents: max, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func after(t *testing.T, l *Log, session string, cursor int64) []Event {
	t.Helper()
	evs, _, err := l.After(context.Background(), session, cursor, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func texts(evs []Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.Text)
	}
	return b.String()
}

// Events are readable the moment they are appended, stay readable while and
// after they are written, continue their numbering after a restart, and
// belong to their session only.
func TestEventsAreReadableAtOnceAndSurviveARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "warren.db")
	db := openDB(t, path)
	l := openLog(t, db, 0)
	for i := range 5 {
		e := l.Append(Event{Session: "s-a", Kind: KindCall, Tool: "shell_exec", Summary: "echo " + string(rune('0'+i))})
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d got seq %d", i, e.Seq)
		}
	}
	l.Append(Event{Session: "s-b", Kind: KindCall, Tool: "read_file"})
	if got := after(t, l, "s-a", 0); len(got) != 5 || got[4].Summary != "echo 4" {
		t.Fatalf("read before the write: %+v", got)
	}
	if got := after(t, l, "s-a", 3); len(got) != 2 || got[0].Seq != 4 {
		t.Fatalf("after cursor 3: %+v", got)
	}
	l.Close()
	if got := after(t, l, "s-b", 0); len(got) != 1 || got[0].Tool != "read_file" {
		t.Fatalf("s-b after close: %+v", got)
	}

	again := openLog(t, openDB(t, path), 0)
	if e := again.Append(Event{Session: "s-a", Kind: KindResult}); e.Seq != 6 {
		t.Fatalf("after a restart the next event of s-a got seq %d, want 6", e.Seq)
	}
	if got := after(t, again, "s-a", 0); len(got) != 6 {
		t.Fatalf("after a restart: %d events, want 6", len(got))
	}
}

// Each session keeps only its newest MaxEvents events.
func TestEachSessionKeepsItsNewestEvents(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "warren.db"))
	l := openLog(t, db, 10)
	for range 25 {
		l.Append(Event{Session: "s-a", Kind: KindOutput, Text: "x"})
	}
	l.Append(Event{Session: "s-b", Kind: KindOutput, Text: "y"})
	l.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM session_events WHERE session_id = 's-a'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 10 {
		t.Fatalf("s-a keeps %d rows, want 10", n)
	}
	got := after(t, l, "s-a", 0)
	if len(got) != 10 || got[0].Seq != 16 || got[9].Seq != 25 {
		t.Fatalf("s-a's events: %d from %d", len(got), got[0].Seq)
	}
	if got := after(t, l, "s-b", 0); len(got) != 1 {
		t.Fatalf("s-b lost its event to s-a's bound: %+v", got)
	}
}

// Secrets never reach the log: not in summaries, not in output, not when a
// token or a private key arrives split over several reads of the pipe.
func TestSecretsAreRedactedEvenWhenSplitAcrossChunks(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "warren.db"))
	l := openLog(t, db, 0)
	const token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB"
	const key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----\n"
	l.Append(Event{Session: "s", Kind: KindCall, Summary: "curl -H 'Authorization: Bearer " + token + "'"})
	s := l.Stream("s", "c-1", "shell_exec", "test")
	out := "export GITHUB_TOKEN=" + token + "\n" + key + "done\n"
	for i := 0; i < len(out); i += 7 { // 7-byte reads split everything
		s.Write(false, []byte(out[i:min(i+7, len(out))]))
	}
	s.Close()
	l.Close()
	evs := after(t, l, "s", 0)
	var all strings.Builder
	for _, e := range evs {
		all.WriteString(e.Summary + e.Text)
	}
	for _, secret := range []string{token[:20], token[20:], "b3BlbnNzaC1rZXktdjEAAAAABG5v", "AAAAMwAAAAtzc2gtZW"} {
		if strings.Contains(all.String(), secret) {
			t.Fatalf("secret %q in the log:\n%s", secret, all.String())
		}
	}
	var rows int
	if err := db.QueryRow(`SELECT count(*) FROM session_events WHERE text LIKE '%b3BlbnNz%' OR summary LIKE '%ghp_%' OR text LIKE '%ghp_%'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Fatalf("%d rows hold a secret", rows)
	}
	if !strings.Contains(texts(evs), "done\n") || !strings.Contains(texts(evs), "[REDACTED]") {
		t.Fatalf("output lost or not marked: %q", texts(evs))
	}
}

// An unfinished key block cut off by the end of the command is replaced,
// not logged in part; an incomplete line (a prompt) is logged after a
// short wait instead of waiting for a newline forever.
func TestUnfinishedKeyBlocksAndPromptsAreHandled(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "warren.db"))
	l := openLog(t, db, 0)
	s := l.Stream("s", "c-1", "shell_exec", "test")
	s.Write(false, []byte("before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7secretbody\n"))
	s.Close()
	got := texts(after(t, l, "s", 0))
	if strings.Contains(got, "MIIEpAIBAAKCAQEA7secretbody") || !strings.Contains(got, "before\n") {
		t.Fatalf("unfinished key block: %q", got)
	}

	p := l.Stream("s2", "c-2", "shell_exec", "test")
	defer p.Close()
	ch := l.Changed("s2")
	p.Write(false, []byte("Continue? [y/N] "))
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("an incomplete line was never logged")
	}
	if got := texts(after(t, l, "s2", 0)); got != "Continue? [y/N] " {
		t.Fatalf("prompt: %q", got)
	}
}

// One command leaves at most MaxCommandOutput bytes in the log, and says
// how much it left out.
func TestCommandOutputIsBounded(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "warren.db"))
	l := openLog(t, db, 0)
	s := l.Stream("s", "c-1", "shell_exec", "test")
	line := strings.Repeat("y", 99) + "\n"
	for range (MaxCommandOutput / len(line)) * 3 {
		s.Write(false, []byte(line))
	}
	s.Close()
	evs := after(t, l, "s", 0)
	got := texts(evs)
	if len(got) > MaxCommandOutput+200 {
		t.Fatalf("the log kept %d bytes of one command's output", len(got))
	}
	if last := evs[len(evs)-1].Text; !strings.Contains(last, "more bytes of output not kept") {
		t.Fatalf("no note of the cut: %q", last)
	}
	for _, e := range evs {
		if len(e.Text) > MaxText {
			t.Fatalf("an event of %d bytes", len(e.Text))
		}
	}
}

// A watcher waiting on Changed is woken by the next event of its session
// only.
func TestChangedWakesTheSessionsWatchers(t *testing.T) {
	l := openLog(t, openDB(t, filepath.Join(t.TempDir(), "warren.db")), 0)
	a, b := l.Changed("a"), l.Changed("b")
	l.Append(Event{Session: "a", Kind: KindCall})
	select {
	case <-a:
	default:
		t.Fatal("a's watcher was not woken")
	}
	select {
	case <-b:
		t.Fatal("b's watcher was woken by a's event")
	default:
	}
}
