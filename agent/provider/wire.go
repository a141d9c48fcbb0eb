package provider

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The OpenAI Chat Completions wire format, as far as the agent uses it.

type wireRequest struct {
	Model             string          `json:"model"`
	Messages          []wireMessage   `json:"messages"`
	Tools             []wireTool      `json:"tools,omitempty"`
	Stream            bool            `json:"stream,omitempty"`
	StreamOptions     *streamOptions  `json:"stream_options,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	Extra             json.RawMessage `json:"-"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type wireMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name string `json:"name,omitempty"`
		// Arguments is a JSON string by the standard; some servers send
		// the object itself.
		Arguments json.RawMessage `json:"arguments,omitempty"`
	} `json:"function"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function Tool   `json:"function"`
}

type wireUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details,omitempty"`
}

func (u *wireUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	out := Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		out.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	return out
}

type wireChoice struct {
	Message      *wireOutMessage `json:"message,omitempty"`
	Delta        *wireOutMessage `json:"delta,omitempty"`
	FinishReason string          `json:"finish_reason,omitempty"`
}

type wireOutMessage struct {
	Role             string         `json:"role,omitempty"`
	Content          string         `json:"content,omitempty"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
}

type wireCompletion struct {
	Choices []wireChoice `json:"choices"`
	Usage   *wireUsage   `json:"usage,omitempty"`
}

func (c *Client) wireRequest(req Request, stream bool) wireRequest {
	w := wireRequest{Model: req.Model, Stream: stream}
	if stream {
		w.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	for _, m := range req.Messages {
		content := m.Content
		wm := wireMessage{Role: m.Role, Content: &content, ToolCallID: m.ToolCallID}
		if m.Role == "assistant" {
			content = StripThink(content)
			if content == "" && len(m.ToolCalls) > 0 {
				wm.Content = nil
			}
		}
		for _, tc := range m.ToolCalls {
			var wt wireToolCall
			wt.ID, wt.Type, wt.Function.Name = tc.ID, "function", tc.Name
			args := tc.Arguments
			if args == "" {
				args = "{}"
			}
			wt.Function.Arguments, _ = json.Marshal(args) // always a string
			wm.ToolCalls = append(wm.ToolCalls, wt)
		}
		w.Messages = append(w.Messages, wm)
	}
	for _, t := range req.Tools {
		w.Tools = append(w.Tools, wireTool{Type: "function", Function: t})
	}
	if len(req.Tools) > 0 && c.Profile.ParallelToolCalls {
		yes := true
		w.ParallelToolCalls = &yes
	}
	return w
}

// argumentText turns the arguments field into JSON text: a string is
// unquoted, an object is kept as its JSON.
func argumentText(raw json.RawMessage) (text string, object bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, false
		}
	}
	return string(raw), true
}

// readCompletion decodes a non-streaming answer.
func readCompletion(r io.Reader) (Response, error) {
	var wc wireCompletion
	if err := json.NewDecoder(io.LimitReader(r, 32<<20)).Decode(&wc); err != nil {
		return Response{}, fmt.Errorf("decode model answer: %w", err)
	}
	if len(wc.Choices) == 0 || wc.Choices[0].Message == nil {
		return Response{}, fmt.Errorf("decode model answer: no choices")
	}
	ch := wc.Choices[0]
	var acc accumulator
	acc.text.WriteString(ch.Message.Content)
	for _, tc := range ch.Message.ToolCalls {
		acc.add(tc)
		acc.last = nil // each entry of a complete message is its own call
	}
	return acc.response(Response{Usage: wc.Usage.usage(), FinishReason: ch.FinishReason}), nil
}

// readStream decodes an SSE stream of chunks until [DONE] or its end.
func readStream(r io.Reader, onText func(string)) (Response, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var acc accumulator
	resp := Response{Streamed: true}
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // comments, event names, blank lines
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			break
		}
		var wc struct {
			wireCompletion
			Error json.RawMessage `json:"error,omitempty"`
		}
		if err := json.Unmarshal(data, &wc); err != nil {
			return Response{}, fmt.Errorf("decode stream chunk: %w", err)
		}
		if len(wc.Error) > 0 && string(wc.Error) != "null" {
			return Response{}, fmt.Errorf("model stream error: %s", wc.Error)
		}
		if u := wc.Usage.usage(); u != (Usage{}) {
			resp.Usage = u
		}
		for _, ch := range wc.Choices {
			if ch.FinishReason != "" {
				resp.FinishReason = ch.FinishReason
			}
			d := ch.Delta
			if d == nil {
				d = ch.Message // some servers put the whole message in the last chunk
			}
			if d == nil {
				continue
			}
			if d.Content != "" {
				acc.text.WriteString(d.Content)
				if onText != nil {
					onText(d.Content)
				}
			}
			for _, tc := range d.ToolCalls {
				acc.add(tc)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Response{}, fmt.Errorf("read model stream: %w", err)
	}
	return acc.response(resp), nil
}

// accumulator assembles tool calls from deltas. Servers differ: OpenAI
// sends index and id; Ollama and some others send neither, or send each
// call whole; arguments arrive split, whole, or as an object.
type accumulator struct {
	// sawID and sawObject record what the server sent, for Probe.
	sawID, sawObject bool
	text             strings.Builder
	calls            []*ToolCall
	byIdx            map[int]*ToolCall
	last             *ToolCall
}

func (a *accumulator) add(tc wireToolCall) {
	var call *ToolCall
	switch {
	case tc.Index != nil:
		if a.byIdx == nil {
			a.byIdx = map[int]*ToolCall{}
		}
		call = a.byIdx[*tc.Index]
		if call == nil {
			call = a.start(tc.ID)
			a.byIdx[*tc.Index] = call
		}
	case tc.ID != "":
		for _, c := range a.calls {
			if c.ID == tc.ID {
				call = c
			}
		}
		if call == nil {
			call = a.start(tc.ID)
		}
	default:
		// No index, no id: a name starts a new call unless the current
		// one has none yet; anything else continues the current call.
		if a.last == nil || (tc.Function.Name != "" && a.last.Name != "") {
			call = a.start("")
		} else {
			call = a.last
		}
	}
	a.sawID = a.sawID || tc.ID != ""
	if tc.ID != "" && call.ID == "" {
		call.ID = tc.ID
	}
	if tc.Function.Name != "" && call.Name == "" {
		call.Name = tc.Function.Name
	}
	if text, object := argumentText(tc.Function.Arguments); object {
		a.sawObject = true
		call.Arguments = text // an object is always whole
	} else {
		call.Arguments += text
	}
	a.last = call
}

func (a *accumulator) start(id string) *ToolCall {
	c := &ToolCall{ID: id}
	a.calls = append(a.calls, c)
	return c
}

func (a *accumulator) response(r Response) Response {
	r.Message = a.message()
	r.idsPresent, r.argsType = a.sawID, "string"
	if a.sawObject {
		r.argsType = "object"
	}
	return r
}

func (a *accumulator) message() Message {
	m := Message{Role: "assistant", Content: a.text.String()}
	for i, c := range a.calls {
		if c.Name == "" {
			continue
		}
		if c.ID == "" {
			// Never send an empty id back: servers match results by it.
			c.ID = "call_" + strconv.Itoa(i+1)
		}
		m.ToolCalls = append(m.ToolCalls, *c)
	}
	return m
}

// StripThink removes <think>…</think> blocks (reasoning that some local
// models print) so that they are shown but never replayed to the model.
func StripThink(s string) string {
	for {
		i := strings.Index(s, "<think>")
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], "</think>")
		if j < 0 {
			return strings.TrimSpace(s[:i])
		}
		s = s[:i] + strings.TrimLeft(s[i+j+len("</think>"):], "\n ")
	}
}
