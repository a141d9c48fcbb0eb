package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// AgentRunInput is the input of agent_run.
type AgentRunInput struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"the session the agent works in; omitted: your default session"`
	Prompt    string `json:"prompt" jsonschema:"what the agent should do"`
	Model     string `json:"model,omitempty" jsonschema:"model name, one of those the server's config allows; omitted: the server's configured model"`
	// The limits below can only lower the operator's policy, never raise it.
	MaxTurns   int     `json:"max_turns,omitempty" jsonschema:"model calls allowed; at most the server's limit (default 50), a larger value is lowered to it"`
	MaxTokens  int64   `json:"max_tokens,omitempty" jsonschema:"token budget of the chat; at most the server's budget, a larger value is lowered to it"`
	MaxCostUSD float64 `json:"max_cost_usd,omitempty" jsonschema:"cost budget of the chat in USD; at most the server's budget, a larger value is lowered to it"`
	Resume     string  `json:"resume,omitempty" jsonschema:"a chat_id from an earlier agent_run to continue"`
}

// AgentToolCall is one tool call the agent made.
type AgentToolCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	IsError   bool   `json:"is_error"`
}

// AgentRunOutput is the output of agent_run.
type AgentRunOutput struct {
	ChatID       string          `json:"chat_id" jsonschema:"pass it as resume to continue the chat"`
	SessionID    string          `json:"session_id"`
	Answer       string          `json:"answer" jsonschema:"the agent's final answer"`
	Ended        string          `json:"ended" jsonschema:"done, error, max_turns, budget, approval or cancelled"`
	Error        string          `json:"error,omitempty"`
	Turns        int             `json:"turns"`
	ToolCalls    []AgentToolCall `json:"tool_calls"`
	InputTokens  int64           `json:"input_tokens"`
	OutputTokens int64           `json:"output_tokens"`
	CostUSD      float64         `json:"cost_usd"`
}

// maxPromptBytes bounds agent_run's prompt (256 KiB: a long brief fits;
// material beyond that belongs in a workspace file the agent reads).
const maxPromptBytes = 256 << 10

func (o AgentRunOutput) inSession() string { return o.SessionID }

// AgentRequest is an agent_run call as the runner sees it.
type AgentRequest struct {
	AgentRunInput
	User string
	// Client is the calling MCP client's name, for metering.
	Client string
}

// Approve asks the calling client whether a tool call may run. It returns
// ErrNoElicitation when the client cannot be asked.
type Approve func(ctx context.Context, tool, arguments string) (bool, error)

// ErrNoElicitation: the calling client does not support elicitation.
var ErrNoElicitation = errors.New("the calling MCP client does not support elicitation, so destructive tool calls cannot be approved")

// AgentRunner runs warren's agent for agent_run; cmd/warren provides it
// when the server's config names a model and a key.
type AgentRunner interface {
	RunAgent(ctx context.Context, req AgentRequest, progress func(line string), approve Approve) (AgentRunOutput, error)
}

func agentRun(d *deps) Tool {
	t := mcp.NewTool("agent_run",
		mcp.WithDescription("Run warren's own agent in a session on the server: it works with the shell and file tools "+
			"until it can answer. Its events stream as progress notifications (one JSON event a line); approvals of "+
			"destructive calls are asked by elicitation. Returns the answer, the tool calls made and the usage; a run "+
			"that ended without an answer (error, limit, approval, cancel) is a tool error. The server's model list "+
			"and limits bind: max_turns and the budgets can only lower them."),
		mcp.WithInputSchema[AgentRunInput](),
		mcp.WithOutputSchema[AgentRunOutput](),
		annotations("Run the agent", false, true, false, true),
	)
	run := typedHandler(func(ctx context.Context, req mcp.CallToolRequest, in AgentRunInput) (result[AgentRunOutput], error) {
		user, err := callerOf(ctx)
		if err != nil {
			return result[AgentRunOutput]{}, err
		}
		if in.Prompt == "" {
			return result[AgentRunOutput]{}, errorf("prompt is empty: say what the agent should do")
		}
		if len(in.Prompt) > maxPromptBytes {
			// The prompt is kept in the chat's transcript and sent with
			// every turn: a caller cannot make the server hold megabytes.
			return result[AgentRunOutput]{}, errorf("prompt is %d bytes, over agent_run's limit of %d: "+
				"put long material in a workspace file and name it in the prompt", len(in.Prompt), maxPromptBytes)
		}
		p := newProgress(ctx, d.notes, req)
		out, err := d.agent.RunAgent(ctx, AgentRequest{AgentRunInput: in, User: user, Client: clientName(ctx)},
			func(line string) { p.add([]byte(line + "\n")) }, d.elicit)
		p.finish()
		if err != nil {
			return result[AgentRunOutput]{}, err
		}
		text := out.Answer
		if out.Ended != "done" {
			text = fmt.Sprintf("the agent stopped (%s): %s\n%s", out.Ended, out.Error, out.Answer)
		}
		return result[AgentRunOutput]{Out: out, Text: text}, nil
	})
	// A run that did not end with an answer (an error, a limit, a refused
	// approval, a cancel) is a failed call: the caller must not take its
	// partial answer for a result. The structured output still says why.
	h := func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := run(ctx, req)
		if out, ok := res.StructuredContent.(AgentRunOutput); err == nil && ok && out.Ended != "done" {
			res.IsError = true
		}
		return res, err
	}
	return Tool{Toolset: "agent", Tool: t, Handler: h}
}

// elicit asks the calling client to approve a tool call.
func (d *deps) elicit(ctx context.Context, tool, arguments string) (bool, error) {
	if s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); !ok || s.GetClientCapabilities().Elicitation == nil {
		return false, ErrNoElicitation
	}
	if mcp.IsModernProtocol(server.RequestProtocolVersion(ctx)) {
		// 2026-07-28 has no server-initiated requests: approvals would
		// need the multi round-trip pattern, which would suspend the run
		// between calls. Not done yet.
		return false, fmt.Errorf("%w (approvals in the middle of a run need protocol revision 2025-11-25; "+
			"this client negotiated %s)", ErrNoElicitation, server.RequestProtocolVersion(ctx))
	}
	var req mcp.ElicitationRequest
	req.Params.Message = fmt.Sprintf("warren's agent wants to run %s %s", tool, arguments)
	req.Params.RequestedSchema = json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean","title":"Run it?"}},"required":["approve"]}`)
	res, err := d.srv.RequestElicitation(ctx, req)
	if errors.Is(err, server.ErrElicitationNotSupported) {
		return false, ErrNoElicitation
	}
	if err != nil {
		return false, fmt.Errorf("ask for approval: %w", err)
	}
	if res.Action != mcp.ElicitationResponseActionAccept {
		return false, nil
	}
	if m, ok := res.Content.(map[string]any); ok {
		if v, ok := m["approve"].(bool); ok {
			return v, nil
		}
	}
	return true, nil
}
