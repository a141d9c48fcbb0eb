package sessions

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox/netproxy"
)

// The proxy's decisions reach the database in batches, are read back
// newest last, and only the newest netLogKeep of a session are kept.
func TestNetworkLogKeepsTheNewestDecisions(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	db := openDB(t, data)
	m := newManager(t, db, Config{DataDir: data})
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var batch []netproxy.Decision
	for i := range netLogKeep + 5 {
		batch = append(batch, netproxy.Decision{Time: at.Add(time.Duration(i) * time.Millisecond), Session: s.ID,
			Method: "CONNECT", Target: fmt.Sprintf("h%d.example:443", i), Host: fmt.Sprintf("h%d.example", i), Port: 443,
			Allowed: i%2 == 0, Reason: "r", BytesUp: int64(i), BytesDown: 1 << 40})
	}
	if err := insertDecisions(ctx, db, batch); err != nil {
		t.Fatal(err)
	}
	got, err := m.Store().NetworkLogOf(ctx, "alice", s.ID, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2].Host != fmt.Sprintf("h%d.example", netLogKeep+4) || got[0].Host != fmt.Sprintf("h%d.example", netLogKeep+2) {
		t.Fatalf("newest three: %+v", got)
	}
	if !got[2].Allowed || got[1].Allowed || got[2].BytesDown != 1<<40 || !got[2].Time.Equal(batch[netLogKeep+4].Time) {
		t.Fatalf("read back differently: %+v", got[2])
	}
	all, err := m.Store().NetworkLogOf(ctx, "alice", s.ID, 0)
	if err != nil || len(all) != netLogKeep || all[0].Host != "h5.example" {
		t.Fatalf("kept %d (first %+v), %v; want the newest %d", len(all), all[0], err, netLogKeep)
	}
	if _, err := m.Store().NetworkLogOf(ctx, "bob", s.ID, 0); err == nil {
		t.Fatal("bob read alice's network log")
	}
}
