package agent

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Approval modes.
const (
	ApprovalAuto     = "auto"      // every offered tool runs
	ApprovalAsk      = "ask"       // destructive tools wait for approval
	ApprovalReadOnly = "read-only" // only read-only tools are offered
)

// Policy bounds what a run may do. It is checked where the tools run, in
// the loop, so it binds agent_run callers as well as the CLI.
type Policy struct {
	// Allow, when not empty, lists the tools or toolsets offered (names or
	// globs: "shell_*", "files"); Deny removes tools or toolsets.
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// Approval is auto, ask or read-only; empty: chosen by DefaultApproval.
	Approval string `json:"approval,omitempty"`
	// MaxTurns bounds model calls per run; 0 means 50.
	MaxTurns int `json:"max_turns,omitempty"`
	// MaxTokens and MaxCostMicros are budgets of the whole chat; the run
	// stops before a model call that would exceed them. 0: none.
	MaxTokens     int64 `json:"max_tokens,omitempty"`
	MaxCostMicros int64 `json:"max_cost_micros,omitempty"`
}

// DefaultMaxTurns is the turn limit when the policy sets none.
const DefaultMaxTurns = 50

// DefaultApproval follows the risk: a session bound to the user's own
// directory edits real files, so destructive calls are asked; clones and
// empty sessions are disposable copies with a diff.
func DefaultApproval(sessionMode string) string {
	if sessionMode == "bind" {
		return ApprovalAsk
	}
	return ApprovalAuto
}

// alwaysDenied are tools the agent never gets: it works in its own session
// and must not start agents, manage sessions or report usage for others.
var alwaysDenied = []string{"agent_run", "session_create", "session_control", "session_list", "usage_record"}

// Validate checks the policy's values.
func (p Policy) Validate() error {
	switch p.Approval {
	case "", ApprovalAuto, ApprovalAsk, ApprovalReadOnly:
	default:
		return fmt.Errorf("approval %q: want auto, ask or read-only", p.Approval)
	}
	if p.MaxTurns < 0 || p.MaxTokens < 0 || p.MaxCostMicros < 0 {
		return fmt.Errorf("max turns, tokens and cost must not be negative")
	}
	return nil
}

func (p Policy) maxTurns() int {
	if p.MaxTurns > 0 {
		return p.MaxTurns
	}
	return DefaultMaxTurns
}

// Lowered applies a caller's limits under the policy, which is a ceiling:
// a caller (agent_run) may lower the turns and the budgets the operator
// configured, never raise them or lift them. 0 asks for nothing.
func (p Policy) Lowered(maxTurns int, maxTokens, maxCostMicros int64) Policy {
	if maxTurns > 0 {
		p.MaxTurns = min(maxTurns, p.maxTurns())
	}
	lower := func(ceiling, asked int64) int64 {
		switch {
		case asked <= 0:
			return ceiling
		case ceiling <= 0: // no budget configured: the caller may set one
			return asked
		}
		return min(ceiling, asked)
	}
	p.MaxTokens = lower(p.MaxTokens, maxTokens)
	p.MaxCostMicros = lower(p.MaxCostMicros, maxCostMicros)
	return p
}

// Offered says whether the model may see and call tool t.
func (p Policy) Offered(t ToolInfo) bool {
	if slices.Contains(alwaysDenied, t.Name) {
		return false
	}
	if p.Approval == ApprovalReadOnly && !t.ReadOnly {
		return false
	}
	if len(p.Allow) > 0 && !matchAny(p.Allow, t) {
		return false
	}
	return !matchAny(p.Deny, t)
}

// NeedsApproval says whether a call of t waits for a yes.
func (p Policy) NeedsApproval(t ToolInfo) bool {
	return p.Approval == ApprovalAsk && t.Destructive
}

func matchAny(patterns []string, t ToolInfo) bool {
	for _, pat := range patterns {
		pat = strings.TrimSpace(pat)
		if pat == t.Toolset {
			return true
		}
		if ok, _ := path.Match(pat, t.Name); ok {
			return true
		}
	}
	return false
}

// String renders the policy for /policy.
func (p Policy) String() string {
	s := fmt.Sprintf("approval %s, max %d turns", p.Approval, p.maxTurns())
	if p.MaxTokens > 0 {
		s += fmt.Sprintf(", budget %d tokens", p.MaxTokens)
	}
	if p.MaxCostMicros > 0 {
		s += fmt.Sprintf(", budget $%.4f", float64(p.MaxCostMicros)/1e6)
	}
	if len(p.Allow) > 0 {
		s += ", allow " + strings.Join(p.Allow, ",")
	}
	if len(p.Deny) > 0 {
		s += ", deny " + strings.Join(p.Deny, ",")
	}
	return s
}
