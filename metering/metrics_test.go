package metering

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Recorded model usage moves the token and cost counters of its price
// entry; a model the price table does not know is counted as "other", so
// that clients cannot add label values at will.
func TestRecordedTokensAreCountedByPriceEntry(t *testing.T) {
	db, _ := openDB(t)
	m := mustOpen(t, db, Options{})
	in := func(model string) float64 { return testutil.ToFloat64(tokens.WithLabelValues(model, "input")) }
	dollars := func(model string) float64 { return testutil.ToFloat64(cost.WithLabelValues(model)) }
	before4o, beforeOther, beforeCost := in("gpt-4o"), in("other"), dollars("gpt-4o")
	mustRecord(t, m, Record{User: "alice", Model: "openai/gpt-4o-2024-08-06", InputTokens: 1000, OutputTokens: 10})
	mustRecord(t, m, Record{User: "alice", Model: "made-up-model-7f3a", InputTokens: 5})
	if d := in("gpt-4o") - before4o; d != 1000 {
		t.Errorf("gpt-4o input tokens moved by %v, want 1000", d)
	}
	if d := in("other") - beforeOther; d != 5 {
		t.Errorf("other input tokens moved by %v, want 5", d)
	}
	// 1000 input at $2.50/M and 10 output at $10/M.
	if d := dollars("gpt-4o") - beforeCost; d < 0.00259 || d > 0.00261 {
		t.Errorf("gpt-4o cost moved by %v, want 0.0026", d)
	}
	if n := testutil.CollectAndCount(tokens); n == 0 {
		t.Fatal("no token series")
	}
	for _, model := range []string{"made-up-model-7f3a", "openai/gpt-4o-2024-08-06", "gpt-4o-2024-08-06"} {
		if testutil.ToFloat64(tokens.WithLabelValues(model, "input")) != 0 {
			t.Errorf("a series labelled %q exists", model)
		}
	}
}
