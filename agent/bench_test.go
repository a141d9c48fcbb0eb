package agent_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/warrenhq/warren/agent"
	pt "github.com/warrenhq/warren/agent/provider/providertest"
	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sessions"
)

// BenchmarkToolRoundTripOverhead measures warren's own time per tool round
// trip: from the last byte of the model's answer to the next request,
// minus the time the tool itself ran (reported per result).
func BenchmarkToolRoundTripOverhead(b *testing.B) {
	t := &testing.T{}
	w := newWorld(t, sessions.ModeEmpty, "")
	s := pt.New(pt.OpenAI)
	defer s.Close()
	n := 0
	s.Script = func(pt.Request) pt.Reply {
		n++
		if n > b.N {
			return pt.Reply{Text: "done"}
		}
		return pt.Reply{Calls: []pt.Call{{Name: "read_file", Args: `{"path":"missing.txt"}`}}}
	}
	a := w.agent(t, s, agent.Policy{MaxTurns: b.N + 2}, nil)
	var toolTime time.Duration
	b.ResetTimer()
	a.Run(context.Background(), "go", func(e agent.Event) {
		if e.Type == agent.EventToolResult {
			toolTime += time.Duration(e.Result.Millis) * time.Millisecond
		}
	})
	b.StopTimer()
	var gaps time.Duration
	for _, g := range s.Gaps() {
		gaps += g
	}
	if len(s.Gaps()) > 0 {
		b.ReportMetric(float64((gaps-toolTime).Microseconds())/float64(len(s.Gaps())), "µs/roundtrip-overhead")
		b.ReportMetric(float64(gaps.Microseconds())/float64(len(s.Gaps())), "µs/roundtrip-total")
	}
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
