package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/agent"
	"github.com/warrenhq/warren/agent/chat"
	"github.com/warrenhq/warren/agent/provider"
	"github.com/warrenhq/warren/agent/transcript"
	"github.com/warrenhq/warren/mcp"
	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/bound"
	"github.com/warrenhq/warren/sessions/errs"
)

// agentRunner serves agent_run: the same agent as warren chat, run on the
// server in the caller's session, with approvals asked of the caller.
type agentRunner struct {
	srv      *mcp.Server // set once the server is built
	store    *transcript.Store
	meter    *metering.Meter
	sessions *sessions.Manager
	cfg      chatConfig
	key      string
	// logTranscripts is metering's log_transcripts (see chat.Options).
	logTranscripts bool
}

// newAgentRunner returns the runner when the config names a model and a
// key is known (config or OPENAI_API_KEY), else nil: agent_run is then
// not served.
func newAgentRunner(c *cli.Context, db *sql.DB, dir string, mgr *sessions.Manager, meter *metering.Meter) (*agentRunner, error) {
	cfg, err := loadConfig(c, dir)
	if err != nil {
		return nil, err
	}
	key := os.Getenv("OPENAI_API_KEY")
	if key == "" {
		key = cfg.Agent.APIKey
	}
	if cfg.Agent.Model == "" || (key == "" && (cfg.Agent.BaseURL == "" || cfg.Agent.BaseURL == defaultBaseURL)) {
		return nil, nil
	}
	if cfg.Agent.BaseURL == "" {
		cfg.Agent.BaseURL = defaultBaseURL
	}
	st, err := transcript.Open(c.Context, db)
	if err != nil {
		return nil, err
	}
	return &agentRunner{store: st, meter: meter, sessions: mgr, cfg: cfg.Agent, key: key,
		logTranscripts: cfg.Metering.LogTranscripts}, nil
}

// RunAgent implements mcp.AgentRunner.
func (r *agentRunner) RunAgent(ctx context.Context, req mcp.AgentRequest, progress func(string), approve mcp.Approve) (mcp.AgentRunOutput, error) {
	// The operator's config is a ceiling: a caller chooses only among the
	// allowed models (checked before anything runs or is sent) and may
	// only lower the limits.
	model := req.Model
	if model == "" {
		model = r.cfg.Model
	}
	if allowed := r.cfg.allowedModels(); !slices.Contains(allowed, model) {
		return mcp.AgentRunOutput{}, errs.New(errs.Invalid, fmt.Sprintf("model %q is not allowed on this server: choose one of %s "+
			"(or omit model for %s); the operator allows more with agent.models in the config file",
			bound.String(model, bound.Name), strings.Join(allowed, ", "), r.cfg.Model))
	}
	sessionID := req.SessionID
	if req.Resume != "" && sessionID == "" {
		if old, err := r.store.Get(ctx, req.User, req.Resume); err == nil {
			sessionID = old.Session
		}
	}
	s, err := r.sessions.Get(ctx, req.User, sessionID)
	if err != nil {
		return mcp.AgentRunOutput{}, err
	}
	user := req.User
	tools, err := agent.ConnectInProcess(ctx, r.srv.MCPServer(), func(ctx context.Context) context.Context { return mcp.WithUser(ctx, user) }, "agent_run")
	if err != nil {
		return mcp.AgentRunOutput{}, err
	}
	defer tools.Close()
	profile, _, err := r.store.Profile(ctx, r.cfg.BaseURL, model)
	if err != nil {
		return mcp.AgentRunOutput{}, err
	}
	policy := r.cfg.Policy
	if policy.Approval == "" {
		policy.Approval = agent.DefaultApproval(string(s.Mode))
	}
	policy = policy.Lowered(req.MaxTurns, req.MaxTokens, int64(req.MaxCostUSD*1e6))
	client := "agent_run"
	if req.Client != "" {
		client += "/" + req.Client
	}
	cfg := agent.Config{Model: &provider.Client{BaseURL: r.cfg.BaseURL, APIKey: r.key, Profile: profile, OnProfile: rememberProfile(ctx, r.store)},
		ModelName: model,
		Tools:     tools, Policy: policy, User: req.User, Session: s.ID, Client: client, Meter: r.meter, Images: r.cfg.imagesFor(profile),
		Approve: func(ctx context.Context, call agent.CallInfo, _ agent.ToolInfo) (agent.Decision, error) {
			ok, err := approve(ctx, call.Name, call.Arguments)
			if errors.Is(err, mcp.ErrNoElicitation) {
				return agent.Deny, agent.ErrNoApprover
			}
			if err != nil || !ok {
				return agent.Deny, err
			}
			return agent.Approve, nil
		}}
	sess, err := chat.Open(ctx, chat.Options{Store: r.store, Agent: cfg, BaseURL: r.cfg.BaseURL, Resume: req.Resume,
		LogTranscripts: r.logTranscripts})
	if err != nil {
		return mcp.AgentRunOutput{}, err
	}
	out := mcp.AgentRunOutput{ChatID: sess.Chat.ID, SessionID: s.ID, ToolCalls: []mcp.AgentToolCall{}}
	d, err := sess.Run(ctx, req.Prompt, func(e agent.Event) {
		if e.Type == agent.EventToolResult {
			var args string
			for _, m := range sess.Agent.Messages {
				for _, tc := range m.ToolCalls {
					if tc.ID == e.Result.ID {
						args = tc.Arguments
					}
				}
			}
			out.ToolCalls = append(out.ToolCalls, mcp.AgentToolCall{Name: e.Result.Name, Arguments: args, IsError: e.Result.IsError})
		}
		if b, err := json.Marshal(e); err == nil {
			progress(string(b))
		}
	})
	if err != nil {
		return mcp.AgentRunOutput{}, err
	}
	t := sess.Chat.Totals
	out.Answer, out.Ended, out.Error, out.Turns = d.Answer, d.Reason, d.Error, d.Turns
	out.InputTokens, out.OutputTokens, out.CostUSD = t.InputTokens, t.OutputTokens, float64(t.CostMicros)/1e6
	return out, nil
}
