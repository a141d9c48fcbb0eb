package transcript

import (
	"context"
	"errors"
	"testing"

	"github.com/warrenhq/warren/agent"
	"github.com/warrenhq/warren/agent/provider"
	"github.com/warrenhq/warren/sessions/sqlschema/sqltest"
)

// TestMain runs the tests on SQLite, then on PostgreSQL (sqltest).
func TestMain(m *testing.M) { sqltest.Main(m, "") }

// A chat is kept with its messages and events, is the user's latest, is
// read back only by its user, and resumes where it stopped.
func TestChatsAreKeptAndReadBackByTheirUser(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, sqltest.Open(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	first := &Chat{ID: NewID(), User: "alice", Session: "s-1", Model: "m", BaseURL: "http://x", Title: "one"}
	if err := s.Create(ctx, first, []provider.Message{{Role: "user", Content: "hi"}}); err != nil {
		t.Fatal(err)
	}
	second := &Chat{ID: NewID(), User: "alice", Session: "s-1", Model: "m", BaseURL: "http://x", Title: "two"}
	if err := s.Create(ctx, second, []provider.Message{{Role: "user", Content: "again"}}); err != nil {
		t.Fatal(err)
	}
	// Same millisecond or not, the chat made last is the latest.
	second.Totals = agent.Totals{Turns: 2, InputTokens: 5_000_000_000, Estimated: true}
	msgs := []provider.Message{{Role: "user", Content: "again"}, {Role: "assistant", Content: "yes"}}
	for range 2 { // events append
		if err := s.Save(ctx, second, msgs, []agent.Event{{Type: "text", Text: "y"}}); err != nil {
			t.Fatal(err)
		}
	}
	latest, err := s.Get(ctx, "alice", "")
	if err != nil || latest.ID != second.ID || latest.Totals.InputTokens != 5_000_000_000 || !latest.Totals.Estimated {
		t.Fatalf("latest = %+v, %v", latest, err)
	}
	list, err := s.List(ctx, "alice")
	if err != nil || len(list) != 2 || list[0].ID != second.ID {
		t.Fatalf("list = %v, %v", list, err)
	}
	got, err := s.Messages(ctx, second.ID)
	if err != nil || len(got) != 2 || got[1].Content != "yes" {
		t.Fatalf("messages = %+v, %v", got, err)
	}
	evs, err := s.Events(ctx, second.ID)
	if err != nil || len(evs) != 2 {
		t.Fatalf("events = %+v, %v", evs, err)
	}
	if _, err := s.Get(ctx, "bob", second.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob read alice's chat: %v", err)
	}
	p := provider.DefaultProfile("http://x", "m")
	p.Server = "ollama"
	for range 2 {
		if err := s.SaveProfile(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if got, ok, err := s.Profile(ctx, "http://x", "m"); err != nil || !ok || got.Server != "ollama" {
		t.Fatalf("profile = %+v %v %v", got, ok, err)
	}
}
