package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

func event(n int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`)
}

// TestEventStoreIsBounded: per session, in total and in age, whatever a
// client streams.
func TestEventStoreIsBounded(t *testing.T) {
	ctx := context.Background()
	clock := time.Now()
	s := newEventStore(100<<10, 250<<10, time.Minute)
	s.now = func() time.Time { return clock }

	var ids []string
	for range 1000 { // 16 MB through one session
		id, err := s.StoreEvent(ctx, "a", "stream-1", event(16<<10))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if got := s.kept("a"); got > 100<<10 || got == 0 {
		t.Fatalf("session a keeps %d bytes, bound %d", got, 100<<10)
	}
	// The oldest are gone; the newest can be resumed from.
	if _, err := s.ReplayEventsAfter(ctx, "a", ids[0], func(string, json.RawMessage) error { return nil }); !errors.Is(err, server.ErrUnknownEventID) {
		t.Fatalf("resume from a dropped event: %v", err)
	}
	var replayed []string
	stream, err := s.ReplayEventsAfter(ctx, "a", ids[len(ids)-3], func(id string, _ json.RawMessage) error {
		replayed = append(replayed, id)
		return nil
	})
	if err != nil || stream != "stream-1" || strings.Join(replayed, ",") != strings.Join(ids[len(ids)-2:], ",") {
		t.Fatalf("resume from a kept event: stream %q, replayed %v, err %v", stream, replayed, err)
	}
	// Another session's id means nothing here.
	if _, err := s.ReplayEventsAfter(ctx, "b", ids[len(ids)-3], func(string, json.RawMessage) error { return nil }); !errors.Is(err, server.ErrUnknownEventID) {
		t.Fatalf("resume another session's event: %v", err)
	}

	// Many sessions: the total stays bounded.
	for i := range 20 {
		for range 10 {
			if _, err := s.StoreEvent(ctx, "s"+strconv.Itoa(i), "x", event(16<<10)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := s.kept(""); got > 250<<10 {
		t.Fatalf("all sessions keep %d bytes, bound %d", got, 250<<10)
	}

	// Age: nothing older than a minute survives the next store.
	clock = clock.Add(2 * time.Minute)
	if _, err := s.StoreEvent(ctx, "late", "x", event(10)); err != nil {
		t.Fatal(err)
	}
	if got := s.kept(""); got != 10 {
		t.Fatalf("after two minutes %d bytes are kept, want only the new event's 10", got)
	}

	// A session's purge frees it.
	if err := s.PurgeSession(ctx, "late"); err != nil {
		t.Fatal(err)
	}
	if got := s.kept(""); got != 0 {
		t.Fatalf("after purge %d bytes are kept", got)
	}
}

// TestEventStoreForgetsAClientThatLeft: with no new events to trigger it,
// aged events are still dropped.
func TestEventStoreForgetsAClientThatLeft(t *testing.T) {
	s := newEventStore(1<<20, 1<<20, 50*time.Millisecond)
	if _, err := s.StoreEvent(context.Background(), "gone", "x", event(1000)); err != nil {
		t.Fatal(err)
	}
	for s.kept("") != 0 {
		time.Sleep(10 * time.Millisecond) // the test's own timeout bounds this
	}
}
