package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/warrenhq/warren/agent/provider"
	pt "github.com/warrenhq/warren/agent/provider/providertest"
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

// imageTools is a ToolRunner whose "look" tool returns a picture.
type imageTools struct{}

func (imageTools) List(context.Context) ([]ToolInfo, error) {
	return []ToolInfo{{Name: "look", ReadOnly: true, Schema: json.RawMessage(`{"type":"object"}`)},
		{Name: "note", ReadOnly: true, Schema: json.RawMessage(`{"type":"object"}`)}}, nil
}

func (t imageTools) Call(ctx context.Context, name string, args map[string]any, p func(string)) (string, bool, error) {
	text, isErr, _, err := t.CallImages(ctx, name, args, p)
	return text, isErr, err
}

func (imageTools) CallImages(_ context.Context, name string, _ map[string]any, _ func(string)) (string, bool, []provider.Image, error) {
	if name == "look" {
		return "[image 1: image/png]", false, []provider.Image{{MIMEType: "image/png", Data: "iVBORw0KGgo="}}, nil
	}
	return "noted", false, nil, nil
}

// Two calls in one message, the first returning a picture: both tool
// results come first (nothing may come between a call and its result),
// then one user message with the picture; a model without images gets
// none and is told.
func TestImagesFollowAllToolResults(t *testing.T) {
	for _, images := range []bool{true, false} {
		s := pt.New(pt.OpenAI, pt.Reply{Calls: []pt.Call{{Name: "look", Args: `{}`}, {Name: "note", Args: `{}`}}}, pt.Reply{Text: "seen"})
		cfg := Config{Model: &provider.Client{BaseURL: s.BaseURL(), Profile: provider.DefaultProfile(s.BaseURL(), "m")},
			ModelName: "m", Tools: imageTools{}, Policy: Policy{Approval: ApprovalAuto}, Images: images}
		a, err := New(context.Background(), cfg, nil, Totals{})
		if err != nil {
			t.Fatal(err)
		}
		if d := a.Run(context.Background(), "look", nil); d.Reason != EndDone {
			t.Fatalf("images %v: %+v", images, d)
		}
		req := s.Requests()[1]
		var roles []string
		for _, m := range req.Messages {
			roles = append(roles, m["role"].(string))
		}
		got := strings.Join(roles, ",")
		switch {
		case images && (got != "system,user,assistant,tool,tool,user" || len(req.Images) != 1 || req.Images[0] != "data:image/png;base64,iVBORw0KGgo="):
			t.Errorf("with images: roles %s, images %v", got, req.Images)
		case !images && (got != "system,user,assistant,tool,tool" || len(req.Images) != 0 || !strings.Contains(req.Messages[3]["content"].(string), "not shown")):
			t.Errorf("without images: roles %s, images %v, %v", got, req.Images, req.Messages[3]["content"])
		}
		s.Close()
	}
}
