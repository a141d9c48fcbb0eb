package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

var probeTool = Tool{Name: "warren_probe", Description: "Probe tool. Call it when asked.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}

// Probe measures what the endpoint does with a few tiny requests and
// returns its profile. It fails only when the endpoint cannot be used at
// all; a known misconfiguration is returned in Profile.Fix.
func Probe(ctx context.Context, base Client, model string) (Profile, error) {
	p := DefaultProfile(base.BaseURL, model)
	p.ParallelToolCalls = false
	c := base
	c.Retries = 1
	c.Profile = p

	// 1. Plain text, streamed: does the endpoint answer, and with usage?
	resp, err := c.chatOnce(ctx, Request{Model: model, Messages: []Message{{Role: "user", Content: "warren probe: say ok"}}}, true, nil)
	if err != nil {
		return p, fmt.Errorf("probe %s: %w", base.BaseURL, err)
	}
	p.UsageInStream = resp.Streamed && !resp.Usage.Estimated

	// 2. Tools without streaming: accepted? ids? argument type?
	one := Request{Model: model, Tools: []Tool{probeTool},
		Messages: []Message{{Role: "user", Content: "Call warren_probe with n=1."}}}
	resp, err = c.chatOnce(ctx, one, false, nil)
	var se *StatusError
	if errors.As(err, &se) {
		p.Tools = false
		p.Fix = fixFor(se.Message)
		if p.Fix == "" {
			p.Fix = "the endpoint refuses tools (" + se.Message + "): use a model and server with function calling"
		}
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("probe tools: %w", err)
	}
	if len(resp.Message.ToolCalls) == 0 {
		p.Tools = false
		p.Fix = "the model answered without calling the tool: choose a model that supports function calling"
		return p, nil
	}
	p.ToolCallIDs, p.ArgumentsType = resp.idsPresent, resp.argsType

	// 3. Tools while streaming: do the calls survive?
	resp, err = c.chatOnce(ctx, one, true, nil)
	p.StreamToolCalls = err == nil && len(resp.Message.ToolCalls) > 0

	// 4. parallel_tool_calls accepted?
	c.Profile.ParallelToolCalls = true
	two := one
	two.Messages = []Message{{Role: "user", Content: "Call warren_probe twice, with n=1 and n=2, in one answer."}}
	_, err = c.chatOnce(ctx, two, false, nil)
	p.ParallelToolCalls = err == nil
	c.Profile.ParallelToolCalls = false

	// 5. Does a long prompt arrive whole? Ollama cuts it at num_ctx.
	filler := strings.Repeat("warren probe filler text. ", 1600) // ~10k tokens
	resp, err = c.chatOnce(ctx, Request{Model: model, Messages: []Message{{Role: "user", Content: "warren probe: " + filler + " say ok"}}}, false, nil)
	if err == nil && !resp.Usage.Estimated && resp.Usage.InputTokens > 0 && resp.Usage.InputTokens < int64(len(filler))/8 {
		p.ContextWindow = resp.Usage.InputTokens
	}
	// 6. Does the model take images? A 1×1 PNG in a user message: a model
	// without vision is refused by the server (vLLM, llama.cpp without a
	// projector) or by the API.
	img := Message{Role: "user", Content: "warren probe: what colour is this pixel? say ok", Images: []Image{probePixel}}
	_, err = c.chatOnce(ctx, Request{Model: model, Messages: []Message{img}}, false, nil)
	p.Images = err == nil
	p.Server = guessServer(p)
	if p.ContextWindow > 0 && p.Fix == "" {
		p.Fix = fmt.Sprintf("the server keeps only about %d tokens of the prompt and cuts the rest silently", p.ContextWindow)
		if p.Server == "ollama" {
			p.Fix += ": start Ollama with OLLAMA_CONTEXT_LENGTH=32768 (or set num_ctx)"
		}
	}
	return p, nil
}

// probePixel is a 1×1 red PNG.
var probePixel = Image{MIMEType: "image/png",
	Data: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"}

// fixFor names the one-line fix of a known misconfiguration.
func fixFor(msg string) string {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "enable-auto-tool-choice"):
		return "vLLM: restart it with --enable-auto-tool-choice --tool-call-parser <parser for your model> (e.g. hermes)"
	case strings.Contains(m, "--jinja"):
		return "llama.cpp: restart llama-server with --jinja so that it applies the model's tool-calling template"
	}
	return ""
}

func guessServer(p Profile) string {
	switch {
	case !p.ToolCallIDs || p.ArgumentsType == "object" || (!p.StreamToolCalls && !p.UsageInStream):
		return "ollama"
	case p.ParallelToolCalls && p.UsageInStream && p.StreamToolCalls:
		return "openai"
	}
	return "unknown"
}
