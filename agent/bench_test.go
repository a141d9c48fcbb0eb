package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/warrenhq/warren/agent"
	pt "github.com/warrenhq/warren/agent/provider/providertest"
	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sessions"
)

// overheadTarget is warren's own time per tool round trip that the agent
// must stay under.
const overheadTarget = 2 * time.Millisecond

// BenchmarkToolRoundTripOverhead measures warren's own time per tool round
// trip: from the last byte of the model's answer (the scripted server
// notes when it wrote it) to the arrival of the next request, minus the
// time the tool itself ran, measured in the loop with time.Since. What is
// left is warren's: decoding the answer, the policy, the MCP client and
// server around the tool, encoding and sending the next request through
// openai-go. Runs are chats of ten round trips (a conversation of a
// typical length: one endless chat would measure the encoding of an ever
// longer history instead). It reports the p50 and p95 in µs, and the p50
// as a ratio to the 2 ms target (agent-overhead/2ms, checked by
// cmd/benchcheck).
func BenchmarkToolRoundTripOverhead(b *testing.B) {
	const perRun = 10
	w := newWorld(b, sessions.ModeEmpty, "")
	if err := os.WriteFile(filepath.Join(w.session.Workspace, "notes.txt"), []byte("a short file\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	s := pt.New(pt.OpenAI)
	defer s.Close()
	n := 0 // requests so far; request n (from 1) is the first of a run when n%(perRun+1) == 1
	s.Script = func(pt.Request) pt.Reply {
		n++
		if n%(perRun+1) == 0 {
			return pt.Reply{Text: "done"}
		}
		return pt.Reply{Calls: []pt.Call{{Name: "read_file", Args: `{"path":"notes.txt"}`}}}
	}
	runs := (b.N + perRun - 1) / perRun
	var tool []time.Duration
	b.ResetTimer()
	for range runs {
		a := w.agent(b, s, agent.Policy{MaxTurns: perRun + 2}, nil)
		d := a.Run(context.Background(), "go", func(e agent.Event) {
			if e.Type == agent.EventToolResult {
				tool = append(tool, e.Result.Elapsed)
			}
		})
		if d.Reason != agent.EndDone {
			b.Fatalf("run %+v", d)
		}
	}
	b.StopTimer()
	// Gaps()[j] is the gap before request j+2; those before a run's first
	// request are the benchmark's own pause, not a round trip.
	var gaps []time.Duration
	for j, g := range s.Gaps() {
		if (j+2)%(perRun+1) != 1 {
			gaps = append(gaps, g)
		}
	}
	if len(gaps) != len(tool) || len(tool) != runs*perRun {
		b.Fatalf("%d gaps, %d tool results for %d round trips", len(gaps), len(tool), runs*perRun)
	}
	own := make([]time.Duration, len(gaps))
	for i := range own {
		own[i] = gaps[i] - tool[i]
	}
	slices.Sort(own)
	p50, p95 := own[len(own)/2], own[len(own)*95/100]
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(p50.Microseconds()), "overhead-p50-µs")
	b.ReportMetric(float64(p95.Microseconds()), "overhead-p95-µs")
	b.ReportMetric(float64(p50)/float64(overheadTarget), "agent-overhead/2ms")
}

// TestToolDefinitionTokens reports what the tool definitions cost in every
// request (the default policy and all toolsets). Run with -v.
func TestToolDefinitionTokens(t *testing.T) {
	w := newWorld(t, sessions.ModeEmpty, "")
	s := pt.New(pt.OpenAI)
	defer s.Close()
	for _, p := range []agent.Policy{{}, {Approval: agent.ApprovalReadOnly}} {
		a := w.agent(t, s, p, nil)
		b, _ := json.Marshal(a.Offered())
		t.Logf("approval %q: %d tools, %d bytes, about %d tokens per request", p.Approval, len(a.Offered()), len(b), metering.EstimateTokens(int64(len(b))))
	}
	all, _ := w.tools.List(context.Background())
	b, _ := json.Marshal(all)
	t.Logf("every tool of the server (%d): %d bytes, about %d tokens", len(all), len(b), metering.EstimateTokens(int64(len(b))))
}
