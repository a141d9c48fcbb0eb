package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/agent/provider"
	"github.com/warrenhq/warren/metering"
)

// Model is a chat model; *provider.Client is one.
type Model interface {
	Chat(ctx context.Context, req provider.Request, onText func(string)) (provider.Response, error)
}

// ToolRunner runs MCP tools; *Tools is one.
type ToolRunner interface {
	List(ctx context.Context) ([]ToolInfo, error)
	Call(ctx context.Context, name string, args map[string]any, onProgress func(string)) (string, bool, error)
}

// Decision is an answer to an approval request.
type Decision int

// Decisions.
const (
	Deny    Decision = iota
	Approve          // this call
	Always           // this call and every later call of the same tool in this chat
)

// Approver asks whether a call may run. It returns ErrNoApprover when
// nobody can answer (no terminal, a client without elicitation).
type Approver func(ctx context.Context, call CallInfo, tool ToolInfo) (Decision, error)

// ErrNoApprover: a call needs approval and nobody can give it.
var ErrNoApprover = errors.New("this call needs approval and there is nobody to ask")

// Config is what a run needs.
type Config struct {
	Model     Model
	ModelName string
	Tools     ToolRunner
	Policy    Policy
	// User, Session, Task and Client label usage records.
	User, Session, Task, Client string
	// Meter records every model call and enforces the session's usage
	// thresholds; nil: nothing is recorded.
	Meter *metering.Meter
	// Approve answers approvals; nil: calls that need one end the run.
	Approve Approver
	// ResultCap bounds each tool result sent back; 0 means 16 KB.
	ResultCap int
	// System is the system prompt; empty means DefaultSystem.
	System string
	// Images: the model takes images, so the pictures tools return
	// (read_file of a PNG) are shown to it. Otherwise it is told they
	// exist and were not shown.
	Images bool
}

// imageCaller is a ToolRunner that returns the images of results too;
// *Tools is one.
type imageCaller interface {
	CallImages(ctx context.Context, name string, args map[string]any, onProgress func(string)) (string, bool, []provider.Image, error)
}

// DefaultSystem is the system prompt of a chat.
const DefaultSystem = "You are warren's coding agent. You work in a jailed workspace mounted at /workspace through the tools " +
	"you are given: a persistent shell (shell_exec) and file tools. Run commands to inspect before you change things; " +
	"keep answers short and say what you changed."

// Totals are a chat's running sums.
type Totals struct {
	Turns        int   `json:"turns"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
	CostMicros   int64 `json:"cost_micros"`
	Estimated    bool  `json:"estimated,omitempty"`
}

// Tokens is input plus output.
func (t Totals) Tokens() int64 { return t.InputTokens + t.OutputTokens }

// Agent is one chat: its messages, totals and policy. It is not safe for
// concurrent runs.
type Agent struct {
	cfg      Config
	Messages []provider.Message
	Totals   Totals
	tools    map[string]ToolInfo
	offered  []provider.Tool
	always   map[string]bool
	callSeq  int
}

// New prepares a chat with the offered tools. history continues an earlier
// chat (its first message is the system prompt).
func New(ctx context.Context, cfg Config, history []provider.Message, totals Totals) (*Agent, error) {
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if cfg.ResultCap == 0 {
		cfg.ResultCap = DefaultResultCap
	}
	a := &Agent{cfg: cfg, Messages: history, Totals: totals, tools: map[string]ToolInfo{}, always: map[string]bool{}}
	if len(a.Messages) == 0 {
		sys := cfg.System
		if sys == "" {
			sys = DefaultSystem
		}
		a.Messages = []provider.Message{{Role: "system", Content: sys}}
	}
	list, err := cfg.Tools.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range list {
		if !cfg.Policy.Offered(t) {
			continue
		}
		a.tools[t.Name] = t
		a.offered = append(a.offered, provider.Tool{Name: t.Name, Description: t.Description, Parameters: stripSession(t.Schema)})
	}
	return a, nil
}

// Policy returns the chat's policy.
func (a *Agent) Policy() Policy { return a.cfg.Policy }

// SetPolicy changes the policy for the next runs (tools already offered
// stay offered; calls are checked again when they run).
func (a *Agent) SetPolicy(p Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	a.cfg.Policy = p
	return nil
}

// stripSession removes session_id from a schema: the agent pins it.
func stripSession(schema json.RawMessage) json.RawMessage {
	var s map[string]any
	if json.Unmarshal(schema, &s) != nil {
		return schema
	}
	if props, ok := s["properties"].(map[string]any); ok {
		delete(props, "session_id")
	}
	if req, ok := s["required"].([]any); ok {
		var keep []any
		for _, r := range req {
			if r != "session_id" {
				keep = append(keep, r)
			}
		}
		s["required"] = keep
		if keep == nil {
			delete(s, "required")
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		return schema
	}
	return b
}

// Run sends prompt and works until the model answers without tools, a
// limit is reached, or ctx ends. Every event goes to emit, the last one
// of type done.
func (a *Agent) Run(ctx context.Context, prompt string, emit func(Event)) DoneInfo {
	r := &run{a: a, emit: emit}
	d := r.loop(ctx, prompt)
	r.recorded() // every record is written when the run ends
	r.send(Event{Type: EventDone, Done: &d})
	return d
}

type run struct {
	a    *Agent
	emit func(Event)
	turn int
	// images are the pictures the tool calls of this turn returned, for
	// a model that takes images.
	images []provider.Image
	// recording is the usage record being written, if any: model records
	// wait for the disk (they are billing data), so they are written while
	// the tools run rather than between the model's answer and them.
	recording chan error
}

// recorded waits for the usage record being written, and warns if it
// failed.
func (r *run) recorded() {
	if r.recording == nil {
		return
	}
	if err := <-r.recording; err != nil {
		r.send(Event{Type: EventWarning, Text: "usage not recorded: " + err.Error()})
	}
	r.recording = nil
}

func (r *run) send(e Event) {
	e.Time = time.Now()
	e.Turn = r.turn
	if r.emit != nil {
		r.emit(e)
	}
}

func (r *run) end(reason, msg string) DoneInfo {
	if strings.TrimSpace(msg) == "" {
		// Every stop says why: an empty error (one from a library that
		// gives none) would print as nothing.
		msg = "the run stopped (" + reason + ") and the cause gave no message"
	}
	if reason == EndError || reason == EndBudget || reason == EndMaxTurns || reason == EndApproval {
		r.send(Event{Type: EventError, Text: msg})
	}
	return DoneInfo{Reason: reason, Error: msg, Turns: r.turn}
}

func (r *run) loop(ctx context.Context, prompt string) DoneInfo {
	a := r.a
	a.Messages = append(a.Messages, provider.Message{Role: "user", Content: prompt})
	for {
		if ctx.Err() != nil {
			return r.end(EndCancelled, "stopped")
		}
		if r.turn >= a.cfg.Policy.maxTurns() {
			hint := "raise it with --max-turns or in the policy"
			if a.cfg.Client != metering.ClientCLI {
				hint = "the server's policy sets it, and a caller can only lower it"
			}
			return r.end(EndMaxTurns, fmt.Sprintf("stopped after %d turns (the limit): %s", r.turn, hint))
		}
		req := provider.Request{Model: a.cfg.ModelName, Messages: a.Messages, Tools: a.offered}
		if msg := r.overBudget(ctx, req); msg != "" {
			return r.end(EndBudget, msg)
		}
		r.turn++
		a.Totals.Turns++
		resp, err := a.cfg.Model.Chat(ctx, req, func(d string) { r.send(Event{Type: EventText, Text: d}) })
		if provider.IsContextLength(err) && r.dropOldOutputs() {
			r.send(Event{Type: EventWarning, Text: "the conversation outgrew the model's context window: older tool outputs were dropped and the call retried"})
			req.Messages = a.Messages
			resp, err = a.cfg.Model.Chat(ctx, req, func(d string) { r.send(Event{Type: EventText, Text: d}) })
		}
		if err != nil {
			if ctx.Err() != nil {
				return r.end(EndCancelled, "stopped")
			}
			return r.end(EndError, err.Error())
		}
		for _, w := range resp.Warnings {
			r.send(Event{Type: EventWarning, Text: w})
		}
		r.account(ctx, resp.Usage)
		msg := resp.Message
		msg.Content = provider.StripThink(msg.Content)
		for i := range msg.ToolCalls {
			a.callSeq++
			if msg.ToolCalls[i].ID == "" || len(msg.ToolCalls[i].ID) < 6 || isMadeUp(msg.ToolCalls[i].ID) {
				msg.ToolCalls[i].ID = "call_w" + strconv.Itoa(a.callSeq)
			}
		}
		a.Messages = append(a.Messages, msg)
		if len(msg.ToolCalls) == 0 {
			if strings.TrimSpace(msg.Content) == "" {
				// Nothing is not an answer (the provider already asked
				// again without streaming when tools were offered).
				return r.end(EndError, "the model answered with nothing (no text and no tool call): try again, "+
					"or check the model with 'warren chat doctor'")
			}
			return DoneInfo{Reason: EndDone, Answer: msg.Content, Turns: r.turn}
		}
		r.images = nil
		for i, call := range msg.ToolCalls {
			if d, stop := r.runCall(ctx, call); stop {
				for _, rest := range msg.ToolCalls[i+1:] {
					a.Messages = append(a.Messages, provider.Message{Role: "tool", ToolCallID: rest.ID, Content: "not run: the run stopped before this call"})
				}
				return d
			}
		}
		if len(r.images) > 0 {
			// Tool messages are text only, and nothing may come between
			// them and their call: the pictures follow them, as a user
			// message.
			a.Messages = append(a.Messages, provider.Message{Role: "user", Images: r.images,
				Content: fmt.Sprintf("The %d image(s) returned by the tool calls above, in order.", len(r.images))})
			a.keepLatestImages(maxImagesKept)
		}
	}
}

// isMadeUp recognises ids the provider made up ("call_1"): they repeat
// from one message to the next, so the loop numbers them per chat.
func isMadeUp(id string) bool {
	n, ok := cutPrefix(id, "call_")
	if !ok {
		return false
	}
	_, err := strconv.Atoi(n)
	return err == nil
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}

// overBudget returns why the next call must not be made, or "".
func (r *run) overBudget(ctx context.Context, req provider.Request) string {
	a := r.a
	p := a.cfg.Policy
	var est int64
	if p.MaxTokens > 0 || p.MaxCostMicros > 0 {
		// Only a budget needs the size of the next request: encoding a
		// long conversation costs time on every turn.
		b, _ := json.Marshal(req)
		est = metering.EstimateTokens(int64(len(b)))
	}
	if p.MaxTokens > 0 && a.Totals.Tokens()+est > p.MaxTokens {
		return fmt.Sprintf("token budget: %d used, the next call needs about %d more, the budget is %d", a.Totals.Tokens(), est, p.MaxTokens)
	}
	if p.MaxCostMicros > 0 && a.cfg.Meter != nil {
		if price, ok := a.cfg.Meter.PriceOf(a.cfg.ModelName); ok {
			next := int64(math.Ceil(float64(est) * price.Input))
			if a.Totals.CostMicros+next > p.MaxCostMicros {
				return fmt.Sprintf("cost budget: $%.4f spent, the next call costs about $%.4f, the budget is $%.4f",
					float64(a.Totals.CostMicros)/1e6, float64(next)/1e6, float64(p.MaxCostMicros)/1e6)
			}
		}
	}
	if a.cfg.Meter != nil && a.cfg.User != "" && a.cfg.Meter.Enforces() {
		r.recorded() // the thresholds are judged on every record so far
		if blocked, reason, err := a.cfg.Meter.Enforced(ctx, a.cfg.User, a.cfg.Session); err == nil && blocked {
			return "usage threshold: " + reason
		}
	}
	return ""
}

// account adds a call's usage to the totals and records it.
func (r *run) account(ctx context.Context, u provider.Usage) {
	a := r.a
	cost := int64(0)
	uncached := max(0, u.InputTokens-u.CachedTokens)
	if a.cfg.Meter != nil {
		if price, ok := a.cfg.Meter.PriceOf(a.cfg.ModelName); ok {
			c := price.Cached
			if c == 0 {
				c = price.Input
			}
			cost = int64(math.Round(float64(uncached)*price.Input + float64(u.OutputTokens)*price.Output + float64(u.CachedTokens)*c))
		}
		if a.cfg.User != "" {
			r.recorded() // one at a time, in order
			rec := metering.Record{User: a.cfg.User, Session: a.cfg.Session, Task: a.cfg.Task,
				Client: a.cfg.Client, Model: a.cfg.ModelName, InputTokens: uncached, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens,
				Estimated: u.Estimated}
			done := make(chan error, 1)
			r.recording = done
			// Written even if the run is cancelled meanwhile: the call was made.
			go func(ctx context.Context) { _, err := a.cfg.Meter.Record(ctx, rec); done <- err }(context.WithoutCancel(ctx))
		}
	}
	a.Totals.InputTokens += u.InputTokens
	a.Totals.OutputTokens += u.OutputTokens
	a.Totals.CachedTokens += u.CachedTokens
	a.Totals.CostMicros += cost
	a.Totals.Estimated = a.Totals.Estimated || u.Estimated
	r.send(Event{Type: EventUsage, Usage: &UsageInfo{Model: a.cfg.ModelName, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CachedTokens: u.CachedTokens, Estimated: u.Estimated, CostMicros: cost, TotalTokens: a.Totals.Tokens(), TotalCostMicros: a.Totals.CostMicros}})
}

// runCall runs one tool call under the policy and appends its result.
// stop says the run must end (with d).
func (r *run) runCall(ctx context.Context, call provider.ToolCall) (d DoneInfo, stop bool) {
	a := r.a
	info := CallInfo{ID: call.ID, Name: call.Name, Arguments: call.Arguments}
	r.send(Event{Type: EventToolCall, Call: &info})
	var elapsed time.Duration // the tool's own time, once it ran
	reply := func(text string, isErr, denied bool, bytes int, ms int64) {
		capped, cut := capResult(text, a.cfg.ResultCap)
		a.Messages = append(a.Messages, provider.Message{Role: "tool", ToolCallID: call.ID, Content: capped})
		r.send(Event{Type: EventToolResult, Result: &ResultInfo{ID: call.ID, Name: call.Name, Text: capped, IsError: isErr,
			Denied: denied, Bytes: bytes, Truncated: cut, Millis: ms, Elapsed: elapsed}})
	}
	tool, ok := a.tools[call.Name]
	if !ok || !a.cfg.Policy.Offered(tool) {
		reply(fmt.Sprintf("error: tool %q is not available in this chat; use one of the tools you were given", call.Name), true, !ok, 0, 0)
		return DoneInfo{}, false
	}
	var args map[string]any
	if call.Arguments != "" {
		if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
			reply(fmt.Sprintf("error: the arguments are not a valid JSON object (%v); call %s again with a JSON object that matches its schema",
				err, call.Name), true, false, 0, 0)
			return DoneInfo{}, false
		}
	}
	if args == nil {
		args = map[string]any{}
	}
	if tool.HasSession && a.cfg.Session != "" {
		args["session_id"] = a.cfg.Session
	}
	if a.cfg.Policy.NeedsApproval(tool) && !a.always[tool.Name] {
		r.send(Event{Type: EventApproval, Call: &info})
		if a.cfg.Approve == nil {
			reply("not run: this call needs approval and nobody could be asked", true, true, 0, 0)
			return r.end(EndApproval, fmt.Sprintf("%s needs approval (policy 'ask') and there is no terminal to ask: "+
				"run interactively, or pass --approval auto if the session is disposable", call.Name)), true
		}
		dec, err := a.cfg.Approve(ctx, info, tool)
		switch {
		case errors.Is(err, ErrNoApprover):
			reply("not run: this call needs approval and nobody could be asked", true, true, 0, 0)
			return r.end(EndApproval, fmt.Sprintf("%s needs approval: %v", call.Name, err)), true
		case err != nil:
			if ctx.Err() != nil {
				reply("not run: the run was stopped", true, true, 0, 0)
				return r.end(EndCancelled, "stopped"), true
			}
			reply("not run: approval failed: "+err.Error(), true, true, 0, 0)
			return DoneInfo{}, false
		case dec == Deny:
			reply("the user declined this call: do not retry it; choose another way or ask the user", true, true, 0, 0)
			return DoneInfo{}, false
		case dec == Always:
			a.always[tool.Name] = true
		}
	}
	start := time.Now()
	onProgress := func(chunk string) { r.send(Event{Type: EventProgress, Call: &info, Text: chunk}) }
	var text string
	var isErr bool
	var images []provider.Image
	var err error
	if ic, ok := a.cfg.Tools.(imageCaller); ok {
		text, isErr, images, err = ic.CallImages(ctx, call.Name, args, onProgress)
	} else {
		text, isErr, err = a.cfg.Tools.Call(ctx, call.Name, args, onProgress)
	}
	elapsed = time.Since(start)
	if len(images) > 0 {
		if a.cfg.Images {
			r.images = append(r.images, images...)
			text += "\n(the image follows in the next message)"
		} else {
			text += "\n(the image is not shown: this model is not known to take images; the user can run 'warren chat doctor' " +
				"or set agent.images in the config. Inspect it with shell_exec instead, e.g. 'file' or 'identify')"
		}
	}
	ms := elapsed.Milliseconds()
	if err != nil {
		if ctx.Err() != nil {
			reply("not run to the end: the run was stopped", true, false, 0, ms)
			return r.end(EndCancelled, "stopped"), true
		}
		text, isErr = "error: "+err.Error(), true
	}
	reply(text, isErr, false, len(text), ms)
	return DoneInfo{}, false
}

// SetApprover sets who answers approvals.
func (a *Agent) SetApprover(fn Approver) { a.cfg.Approve = fn }

// SetModel switches the model for the next calls (same endpoint).
func (a *Agent) SetModel(name string) { a.cfg.ModelName = name }

// ModelName is the model in use.
func (a *Agent) ModelName() string { return a.cfg.ModelName }
