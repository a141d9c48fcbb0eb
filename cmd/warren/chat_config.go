package main

import (
	"slices"

	"github.com/warrenhq/warren/agent"
	"github.com/warrenhq/warren/agent/provider"
)

// chatConfig is the "agent" section of the config file: the model, the
// key and the default policy of `warren chat` and agent_run.
type chatConfig struct {
	Model string `json:"model,omitempty"`
	// Models are the other models agent_run callers may choose (the
	// operator's key pays for them); Model is always allowed. The CLI's
	// --model is the operator's own choice and is not bound by it.
	Models  []string `json:"models,omitempty"`
	BaseURL string   `json:"base_url,omitempty"`
	// APIKey is read from here or from OPENAI_API_KEY, never from argv.
	APIKey string       `json:"api_key,omitempty"`
	Policy agent.Policy `json:"policy,omitempty"`
	// Images says whether the model takes images, over what 'chat doctor'
	// measured (unset: the profile; never probed: no).
	Images *bool `json:"images,omitempty"`
}

// imagesFor says whether pictures are shown to the model of profile p.
func (c chatConfig) imagesFor(p provider.Profile) bool {
	if c.Images != nil {
		return *c.Images
	}
	return p.Images
}

// allowedModels lists the models agent_run callers may choose.
func (c chatConfig) allowedModels() []string {
	out := []string{c.Model}
	for _, m := range c.Models {
		if m != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

const defaultBaseURL = "https://api.openai.com/v1"

// Exit codes of `warren chat -p`, by how the run ended.
const (
	exitDone      = 0
	exitError     = 1
	exitUsage     = 2
	exitMaxTurns  = 3
	exitBudget    = 4
	exitApproval  = 5
	exitCancelled = 130
)

func exitFor(reason string) int {
	switch reason {
	case agent.EndDone:
		return exitDone
	case agent.EndMaxTurns:
		return exitMaxTurns
	case agent.EndBudget:
		return exitBudget
	case agent.EndApproval:
		return exitApproval
	case agent.EndCancelled:
		return exitCancelled
	}
	return exitError
}
