package sessions

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// MCP session ids shared by replicas: bound to their owner, forgotten when
// ended or expired, bounded per owner, and never stored in the clear.
func TestMCPSessionsAreOwnedExpireAndAreBounded(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir())
	if _, err := NewStore(ctx, db); err != nil { // the migrations
		t.Fatal(err)
	}
	clock := time.Unix(1_800_000_000, 0)
	ms := NewMCPSessions(db, 30*time.Minute)
	ms.Now = func() time.Time { return clock }
	if err := ms.Put(ctx, "mcp-session-alice", "alice"); err != nil {
		t.Fatal(err)
	}
	if owner, _, err := ms.Owner(ctx, "mcp-session-alice"); err != nil || owner != "alice" {
		t.Fatalf("owner of alice's session: %q %v", owner, err)
	}
	if owner, _, _ := ms.Owner(ctx, "mcp-session-other"); owner != "" {
		t.Fatalf("an id nobody opened has owner %q", owner)
	}
	if err := ms.SetClient(ctx, "mcp-session-alice", `{"info":{"name":"raw"}}`); err != nil {
		t.Fatal(err)
	}
	if _, client, _ := ms.Owner(ctx, "mcp-session-alice"); client != `{"info":{"name":"raw"}}` {
		t.Fatalf("client of alice's session: %q", client)
	}
	if err := ms.SetClient(ctx, "mcp-session-alice", strings.Repeat("x", MaxMCPClient+1)); err == nil {
		t.Fatal("a client description past the bound was kept")
	}
	var stored string
	if err := db.QueryRowContext(ctx, `SELECT id_hash FROM mcp_sessions`).Scan(&stored); err != nil || strings.Contains(stored, "alice") {
		t.Fatalf("stored id %q (%v): the id itself must not be kept", stored, err)
	}
	// Used within its TTL it lives on; unused past it, it is gone.
	clock = clock.Add(20 * time.Minute)
	if owner, _, _ := ms.Owner(ctx, "mcp-session-alice"); owner != "alice" {
		t.Fatal("a session used within its TTL expired")
	}
	clock = clock.Add(29 * time.Minute)
	if owner, _, _ := ms.Owner(ctx, "mcp-session-alice"); owner != "alice" {
		t.Fatal("the use 29 minutes ago did not keep the session alive")
	}
	clock = clock.Add(31 * time.Minute)
	if owner, _, _ := ms.Owner(ctx, "mcp-session-alice"); owner != "" {
		t.Fatalf("a session unused for 31 minutes still has owner %q", owner)
	}
	// Ended by the client: gone at once.
	if err := ms.Put(ctx, "mcp-session-ended", "alice"); err != nil {
		t.Fatal(err)
	}
	if err := ms.Delete(ctx, "mcp-session-ended"); err != nil {
		t.Fatal(err)
	}
	if owner, _, _ := ms.Owner(ctx, "mcp-session-ended"); owner != "" {
		t.Fatal("an ended session still has an owner")
	}
	// One user opening sessions without end keeps the newest only.
	for i := range MaxMCPSessionsPerOwner + 5 {
		clock = clock.Add(time.Millisecond)
		if err := ms.Put(ctx, fmt.Sprintf("mcp-session-bob-%d", i), "bob"); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM mcp_sessions WHERE owner = 'bob'`).Scan(&n); err != nil || n != MaxMCPSessionsPerOwner {
		t.Fatalf("bob has %d stored sessions (%v), want the cap %d", n, err, MaxMCPSessionsPerOwner)
	}
	if owner, _, _ := ms.Owner(ctx, "mcp-session-bob-0"); owner != "" {
		t.Fatal("bob's oldest session survived the cap")
	}
	if owner, _, _ := ms.Owner(ctx, fmt.Sprintf("mcp-session-bob-%d", MaxMCPSessionsPerOwner+4)); owner != "bob" {
		t.Fatal("bob's newest session was dropped")
	}
}
