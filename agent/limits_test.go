package agent

import (
	"strings"
	"testing"

	"github.com/warrenhq/warren/agent/provider"
)

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

// A conversation keeps only its latest pictures: every request carries
// them all again.
func TestOnlyTheLatestImagesAreKept(t *testing.T) {
	a := &Agent{}
	img := provider.Image{MIMEType: "image/png", Data: "x"}
	for range 3 {
		a.Messages = append(a.Messages, provider.Message{Role: "user", Images: []provider.Image{img, img}})
	}
	a.keepLatestImages(3)
	if n := len(a.Messages[0].Images) + len(a.Messages[1].Images) + len(a.Messages[2].Images); n != 3 ||
		len(a.Messages[2].Images) != 2 || len(a.Messages[0].Images) != 0 || !strings.Contains(a.Messages[0].Content, "dropped") {
		t.Errorf("images kept %d %d %d", len(a.Messages[0].Images), len(a.Messages[1].Images), len(a.Messages[2].Images))
	}
}
