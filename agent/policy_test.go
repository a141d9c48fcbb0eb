package agent

import "testing"

// The operator's policy is a ceiling: a caller's limits only lower it.
func TestLoweredNeverRaisesTheOperatorsLimits(t *testing.T) {
	op := Policy{MaxTurns: 3, MaxTokens: 1000}
	for _, c := range []struct {
		turns       int
		tokens, usd int64
		want        Policy
	}{
		{1000, 0, 0, Policy{MaxTurns: 3, MaxTokens: 1000}},
		{2, 5000, 0, Policy{MaxTurns: 2, MaxTokens: 1000}},
		{0, 10, 7, Policy{MaxTurns: 3, MaxTokens: 10, MaxCostMicros: 7}},
		{-5, -1, -1, Policy{MaxTurns: 3, MaxTokens: 1000}},
	} {
		if got := op.Lowered(c.turns, c.tokens, c.usd); got.maxTurns() != c.want.MaxTurns || got.MaxTokens != c.want.MaxTokens || got.MaxCostMicros != c.want.MaxCostMicros {
			t.Errorf("Lowered(%d, %d, %d) = %+v, want %+v", c.turns, c.tokens, c.usd, got, c.want)
		}
	}
	// Without a configured turn limit the default (50) is the ceiling.
	if got := (Policy{}).Lowered(1000, 0, 0).maxTurns(); got != DefaultMaxTurns {
		t.Errorf("no configured limit, 1000 asked: %d turns", got)
	}
}
