package main

import (
	"github.com/warrenhq/warren/agent"
)

// chatConfig is the "agent" section of the config file: the model, the
// key and the default policy of `warren chat` and agent_run.
type chatConfig struct {
	Model   string `json:"model,omitempty"`
	BaseURL string `json:"base_url,omitempty"`
	// APIKey is read from here or from OPENAI_API_KEY, never from argv.
	APIKey string       `json:"api_key,omitempty"`
	Policy agent.Policy `json:"policy,omitempty"`
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
