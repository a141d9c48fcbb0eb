// Package provider talks to OpenAI-compatible Chat Completions endpoints
// (OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio) and hides their
// differences from the agent loop: streamed tool-call deltas without index
// or id, tool calls dropped when streaming, arguments sent as objects,
// missing usage, <think> blocks, rate limits and context-length errors.
//
// What a given endpoint does is not guessed from model names: Probe
// measures it and returns a Profile that drives the fallbacks.
package provider

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/warrenhq/warren/sessions/errs"
)

// Message is one chat message as the agent keeps it. Content is always a
// string on the wire: several servers reject content arrays in tool
// messages.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
	// Images go with a user message as image_url content parts (the only
	// place the Chat Completions format takes them: tool messages are
	// text). They are not kept in transcripts.
	Images []Image `json:"images,omitempty"`
}

// Image is a picture for a model that takes images.
type Image struct {
	MIMEType string `json:"mime_type"`
	// Data is the image's bytes in standard base64.
	Data string `json:"data"`
}

// DataURL is the image as a data: URL, the form image_url parts take.
func (i Image) DataURL() string { return "data:" + i.MIMEType + ";base64," + i.Data }

// ToolCall is a function call the model asked for. Arguments is the JSON
// text of the arguments, always a string (some servers send an object; it
// is re-encoded).
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a function offered to the model.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one chat completion request.
type Request struct {
	Model    string
	Messages []Message
	Tools    []Tool
}

// Usage is the token use of one model call. InputTokens counts the whole
// prompt, cached tokens included (as OpenAI reports it).
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CachedTokens int64 `json:"cached_tokens,omitempty"`
	// Estimated: the server sent no usage, so it was estimated from sizes.
	Estimated bool `json:"estimated,omitempty"`
}

// Response is the model's answer to one request.
type Response struct {
	Message      Message
	Usage        Usage
	FinishReason string
	// Streamed says whether the answer arrived as a stream.
	Streamed bool
	// Warnings are things the user should know (a silent context cap).
	Warnings []string

	idsPresent bool   // the server sent tool-call ids
	argsType   string // string or object
}

// Profile is what an endpoint and model are known to do. The zero value is
// not a useful profile: start from DefaultProfile.
type Profile struct {
	BaseURL string `json:"base_url"`
	Model   string `json:"model"`
	// Server is a guess of the software (openai, ollama, vllm, llamacpp,
	// unknown), for messages only: behaviour follows the fields below.
	Server string `json:"server"`
	// StreamToolCalls: tool calls arrive when streaming. False makes every
	// request that offers tools a non-streaming one.
	StreamToolCalls bool `json:"stream_tool_calls"`
	// ToolCallIDs: the server sends tool-call ids (stable ids are made up
	// otherwise).
	ToolCallIDs bool `json:"tool_call_ids"`
	// ArgumentsType is "string" (the standard) or "object".
	ArgumentsType string `json:"arguments_type"`
	// ParallelToolCalls: the parallel_tool_calls parameter is accepted.
	// It is sent (as true) only then.
	ParallelToolCalls bool `json:"parallel_tool_calls"`
	// UsageInStream: stream_options.include_usage yields a usage chunk.
	UsageInStream bool `json:"usage_in_stream"`
	// ContextWindow is the prompt size the server really keeps, in tokens
	// (0: unknown). Ollama cuts prompts silently at its num_ctx.
	ContextWindow int64 `json:"context_window,omitempty"`
	// Tools: the endpoint accepts tools at all.
	Tools bool `json:"tools"`
	// Images: the model takes images (image_url content parts). Unknown
	// until probed: the default profile sends none.
	Images bool `json:"images"`
	// Fix is a one-line fix for a known misconfiguration, if any.
	Fix string `json:"fix,omitempty"`
}

// DefaultProfile is assumed for an endpoint that was never probed: the
// OpenAI behaviour, with the parameters that others reject left out.
func DefaultProfile(baseURL, model string) Profile {
	return Profile{BaseURL: baseURL, Model: model, Server: "unknown", StreamToolCalls: true, ToolCallIDs: true,
		ArgumentsType: "string", UsageInStream: true, Tools: true}
}

// ErrContextLength is returned when the prompt does not fit the model's
// context window.
var ErrContextLength = errs.New(errs.Limit, "the conversation is longer than the model's context window")

// StatusError is an HTTP error from the endpoint.
type StatusError struct {
	Status  int
	Code    string
	Message string

	retryAfter string // the Retry-After header, if any
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("model endpoint answered %d", e.Status)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	switch e.Status {
	case 401, 403:
		msg += " (check OPENAI_API_KEY or the agent api_key in the config file)"
	case 404:
		msg += " (check --base-url and --model)"
	}
	return msg
}

// isContextLength recognises the context-length errors of OpenAI, vLLM,
// llama.cpp and LM Studio.
func (e *StatusError) isContextLength() bool {
	if e.Code == "context_length_exceeded" {
		return true
	}
	m := strings.ToLower(e.Message)
	for _, s := range []string{"context length", "context_length", "maximum context", "context window",
		"exceeds the available context", "too many tokens", "prompt is too long"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
