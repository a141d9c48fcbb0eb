// Package agent is warren's bundled agent: one loop that runs turns
// against an OpenAI-compatible model (package provider) with warren's MCP
// tools (in-process or over HTTP), under a per-session policy, and emits a
// typed event stream. Nothing renders here: `warren chat` renders the
// events in a terminal and the agent_run tool streams them to MCP clients.
package agent

import "time"

// EventType names an event.
type EventType string

// Event types.
const (
	EventText       EventType = "text"        // a delta of the model's text
	EventToolCall   EventType = "tool_call"   // the model asked for a tool
	EventProgress   EventType = "progress"    // live output of a running tool
	EventToolResult EventType = "tool_result" // what went back to the model
	EventApproval   EventType = "approval"    // a call waits for approval
	EventUsage      EventType = "usage"       // one model call's tokens and cost
	EventWarning    EventType = "warning"     // something the user should know
	EventError      EventType = "error"       // the run failed
	EventDone       EventType = "done"        // the run ended (always last)
)

// Reasons a run ends.
const (
	EndDone      = "done"      // the model answered without calling tools
	EndError     = "error"     // the model or the tools failed
	EndMaxTurns  = "max_turns" // the turn limit was reached
	EndBudget    = "budget"    // the next call would exceed a budget
	EndApproval  = "approval"  // a call needed approval and nobody could give it
	EndCancelled = "cancelled" // the caller stopped the run
)

// Event is one thing that happened in a run. It is the schema of
// stream-json output, of stored transcripts and of agent_run progress.
type Event struct {
	Type EventType `json:"type"`
	Time time.Time `json:"time"`
	Turn int       `json:"turn,omitempty"`
	// Text: the delta (text), the message (warning, error) or the chunk of
	// output (progress).
	Text   string      `json:"text,omitempty"`
	Call   *CallInfo   `json:"call,omitempty"`
	Result *ResultInfo `json:"result,omitempty"`
	Usage  *UsageInfo  `json:"usage,omitempty"`
	Done   *DoneInfo   `json:"done,omitempty"`
}

// CallInfo describes a tool call.
type CallInfo struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ResultInfo is the result of a tool call as the model sees it.
type ResultInfo struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Text    string `json:"text"`
	IsError bool   `json:"is_error,omitempty"`
	// Bytes is the size of the full result before capping.
	Bytes     int  `json:"bytes"`
	Truncated bool `json:"truncated,omitempty"`
	// Denied: the call was refused by the policy or the user.
	Denied bool `json:"denied,omitempty"`
	// Millis is how long the tool ran.
	Millis int64 `json:"ms"`
	// Elapsed is the same, exactly (time.Since around the call in the
	// loop), for measurements; not part of the event schema.
	Elapsed time.Duration `json:"-"`
}

// UsageInfo is the use of one model call and the run's totals.
type UsageInfo struct {
	Model        string `json:"model"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	CachedTokens int64  `json:"cached_tokens,omitempty"`
	Estimated    bool   `json:"estimated,omitempty"`
	CostMicros   int64  `json:"cost_micros"`
	// Totals of the chat so far.
	TotalTokens     int64 `json:"total_tokens"`
	TotalCostMicros int64 `json:"total_cost_micros"`
}

// DoneInfo says how a run ended.
type DoneInfo struct {
	Reason string `json:"reason"`
	Answer string `json:"answer,omitempty"`
	Error  string `json:"error,omitempty"`
	Turns  int    `json:"turns"`
}
