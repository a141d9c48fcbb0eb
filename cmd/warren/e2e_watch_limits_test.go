package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxWatchReply is what docs/sessions.md promises of one session_watch
// reply: its events take at most 256 KiB as JSON, so the whole result (they
// are in it twice, structured and as text) stays under 512 KiB.
const maxWatchReply = 512 << 10

// TestWatchRepliesAreBoundedInBytes: a session whose log holds a thousand
// events of 16 KB (16 MB), read from the start by 40 watchers at once, as
// a console or a client catching up does. Every reply is at most 512 KiB and
// says when it was cut; each watcher pages on from the cursor and gets
// every event exactly once (one reads to the end); the server's peak memory grows by a bounded
// amount (40 replies of 16 MB took it from 76 to 350 MB).
func TestWatchRepliesAreBoundedInBytes(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	tok := createToken(t, data, "alice")
	srv := serveHTTP(t, "--data-dir", data)
	alice := connectHTTP(t, srv, tok)
	session := alice.ok("session_create", map[string]any{"name": "loud"})["session_id"].(string)
	// Each command leaves its first 256 KB of output in the log, as 16 KB
	// events: 64 commands leave about a thousand.
	for range 64 {
		alice.exec("head -c 200000 /dev/urandom | base64 -w 0", "session_id", session)
	}
	last := watchCall(t, alice.cs, map[string]any{"session_id": session, "tail": 1}, "").Cursor
	if last < 1000 {
		t.Fatalf("the log holds %d events, want over 1000", last)
	}

	pid := srv.cmd.Process.Pid
	// Reset the peak resident set (VmHWM) to what is resident now.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("reset the server's peak RSS: %v", err)
	}
	before := procStatus(t, pid, "VmRSS")

	var wg sync.WaitGroup
	var mu sync.Mutex
	var cut, refused int
	var largest int
	for w := range 40 {
		wg.Go(func() {
			c := connectHTTP(t, srv, tok)
			cursor, seen, pages := int64(0), int64(0), 0
			for {
				p := &sdk.CallToolParams{Name: "session_watch", Arguments: map[string]any{"session_id": session, "after": cursor, "limit": 1000}}
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				res, err := c.cs.CallTool(ctx, p)
				cancel()
				if err != nil {
					t.Errorf("watcher %d: %v", w, err)
					return
				}
				if res.IsError {
					// Over the user's cap of watches in flight: try again.
					if !strings.Contains(textOf(res), "limit") {
						t.Errorf("watcher %d: %s", w, textOf(res))
						return
					}
					mu.Lock()
					refused++
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
					continue
				}
				b, _ := json.Marshal(res)
				var out struct {
					Events []watchedEvent `json:"events"`
					Cursor int64          `json:"cursor"`
					More   bool           `json:"more"`
					Cut    bool           `json:"cut"`
				}
				sb, _ := json.Marshal(res.StructuredContent)
				if err := json.Unmarshal(sb, &out); err != nil {
					t.Errorf("watcher %d: %v", w, err)
					return
				}
				mu.Lock()
				largest = max(largest, len(b))
				if out.Cut {
					cut++
				}
				mu.Unlock()
				if len(b) > maxWatchReply {
					t.Errorf("watcher %d: a reply of %d bytes (%d events), over the cap of %d", w, len(b), len(out.Events), maxWatchReply)
					return
				}
				if out.Cut && !strings.Contains(textOf(res), "cut at the reply's cap") {
					t.Errorf("watcher %d: a cut reply whose text does not say so: %q", w, tail(textOf(res), 200))
				}
				for _, e := range out.Events {
					if seen != 0 && e.Seq != seen+1 {
						t.Errorf("watcher %d: event %d after %d: events were lost between replies", w, e.Seq, seen)
						return
					}
					seen = e.Seq
				}
				cursor = out.Cursor
				pages++
				// One watcher reads to the end; the others, a client's
				// first pages, keep the server busy meanwhile.
				if !out.More || w > 0 && pages == 4 {
					break
				}
			}
			if w == 0 && seen < last {
				t.Errorf("watcher %d: read up to event %d of %d", w, seen, last)
			}
		})
	}
	wg.Wait()
	grew := (procStatus(t, pid, "VmHWM") - before) / 1024
	t.Logf("40 watchers: largest reply %d bytes, %d replies cut, %d calls refused over the per-user cap; peak RSS %d MB over the %d MB before",
		largest, cut, refused, grew, before/1024)
	if cut == 0 {
		t.Error("no reply said it was cut at the cap")
	}
	if grew > 150 {
		t.Errorf("the server's peak RSS grew by %d MB while 40 watchers read the log", grew)
	}
}

func tail(s string, n int) string { return s[max(len(s)-n, 0):] }

// TestWatchesPerUserAreCapped: one user's long polls are bounded (8 in
// flight); the next is refused with a limit error that names the cap, and
// another user still watches.
func TestWatchesPerUserAreCapped(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	aliceTok, bobTok := createToken(t, data, "alice"), createToken(t, data, "bob")
	srv := serveHTTP(t, "--data-dir", data)
	alice, bob := connectHTTP(t, srv, aliceTok), connectHTTP(t, srv, bobTok)
	alice.exec("echo alice")
	bob.exec("echo bob")
	cursor := watchCall(t, alice.cs, map[string]any{"tail": 1}, "").Cursor

	// Long polls: nothing new comes until the test makes it.
	var polls sync.WaitGroup
	returned := make(chan struct{})
	for range 8 {
		polls.Go(func() {
			for {
				res := alice.call("session_watch", map[string]any{"after": cursor, "wait_ms": 50000})
				if !res.IsError {
					return
				}
				// The probe below held a slot for a moment: try again.
				if !strings.Contains(textOf(res), "limit") {
					t.Errorf("long poll: %s", textOf(res))
					return
				}
			}
		})
	}
	go func() { polls.Wait(); close(returned) }()
	refusal := ""
	for refusal == "" {
		select {
		case <-returned:
			t.Fatal("8 long polls ended and a ninth was never refused")
		default:
		}
		res := alice.call("session_watch", map[string]any{"after": cursor})
		if res.IsError {
			refusal = textOf(res)
		}
	}
	if !strings.Contains(refusal, "limit") || !strings.Contains(refusal, "(8)") {
		t.Fatalf("the refusal %q does not say it is a limit and name the cap", refusal)
	}
	// Another user is not affected by alice's polls.
	if w := watchCall(t, bob.cs, map[string]any{"after": 0}, ""); len(w.Events) == 0 {
		t.Fatal("bob's watch returned nothing")
	}
	// An event ends alice's polls; then she may watch again.
	alice.exec("echo wake")
	<-returned
	alice.ok("session_watch", map[string]any{"after": cursor})
}
