package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// What openai-go does and what warren adds on top:
//
//   - openai-go encodes the request (messages, tools, stream_options,
//     parallel_tool_calls), sends it, parses SSE and decodes chunks and
//     completions into typed structs that keep every field's presence and
//     raw JSON (respjson.Field).
//   - warren reads those raw fields where servers leave the standard:
//     a tool-call delta without "index" (Index.Valid() is false), without
//     "id", or with "arguments" as a JSON object (Arguments.Valid() is
//     false, Raw() holds the object); a final chunk that carries "message"
//     instead of "delta" (ExtraFields["message"]). The assembling is
//     accumulator's, not openai-go's ChatCompletionAccumulator, which
//     keys calls by index.
//   - a middleware bounds response bodies, measures the request size (for
//     usage estimates and the silent-cap check), and turns a plain JSON
//     answer to a streamed request into a one-event stream (servers that
//     ignore "stream").
//   - retries are warren's (openai-go's are switched off): Retry-After is
//     capped, the waits are injectable for tests, and a context-length
//     error is never retried.

// maxBody bounds what is read of one response.
const maxBody = 32 << 20

// params builds the request.
func (c *Client) params(req Request, stream bool) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{Model: req.Model, Messages: make([]openai.ChatCompletionMessageParamUnion, 0, len(req.Messages))}
	for _, m := range req.Messages {
		p.Messages = append(p.Messages, messageParam(m))
	}
	p.Tools = c.toolParams(req.Tools)
	if stream {
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
	if len(req.Tools) > 0 && c.Profile.ParallelToolCalls {
		// Sent only to endpoints known to accept it: some reject unknown
		// parameters.
		p.ParallelToolCalls = openai.Bool(true)
	}
	return p
}

// toolParams converts the offered tools, once for a given list: the agent
// offers the same list on every turn, and decoding every schema again
// would cost each round trip.
func (c *Client) toolParams(tools []Tool) []openai.ChatCompletionToolUnionParam {
	if len(tools) == 0 {
		return nil
	}
	if len(c.toolsFor) == len(tools) && &c.toolsFor[0] == &tools[0] {
		return c.tools
	}
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(tools))
	for _, t := range tools {
		var schema map[string]any
		if len(t.Parameters) > 0 {
			_ = json.Unmarshal(t.Parameters, &schema)
		}
		if schema == nil {
			schema = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		fn := openai.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		out = append(out, openai.ChatCompletionFunctionTool(fn))
	}
	c.toolsFor, c.tools = tools, out
	return out
}

func messageParam(m Message) openai.ChatCompletionMessageParamUnion {
	switch m.Role {
	case "system":
		return openai.SystemMessage(m.Content)
	case "tool":
		// Always a string: several servers reject content arrays here.
		return openai.ToolMessage(m.Content, m.ToolCallID)
	case "assistant":
		a := openai.ChatCompletionAssistantMessageParam{}
		if content := StripThink(m.Content); content != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = openai.String(content)
		}
		for _, tc := range m.ToolCalls {
			args := tc.Arguments
			if args == "" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: tc.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: args}}})
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
	}
	if len(m.Images) > 0 {
		parts := make([]openai.ChatCompletionContentPartUnionParam, 0, len(m.Images)+1)
		if m.Content != "" {
			parts = append(parts, openai.TextContentPart(m.Content))
		}
		for _, img := range m.Images {
			parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: img.DataURL()}))
		}
		return openai.UserMessage(parts)
	}
	return openai.UserMessage(m.Content)
}

// argsOf reads the arguments field: the standard string, or the object
// some servers send (openai-go marks it invalid and keeps its raw JSON).
func argsOf(value string, f respjson.Field) (text string, object bool) {
	if f.Valid() {
		return value, false
	}
	raw := strings.TrimSpace(f.Raw())
	if raw == "" || raw == "null" {
		return "", false
	}
	return raw, true
}

// usageOf converts openai-go's usage, if the server sent one.
func usageOf(u openai.CompletionUsage, present respjson.Field) Usage {
	if !present.Valid() {
		return Usage{}
	}
	return Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, CachedTokens: u.PromptTokensDetails.CachedTokens}
}

// readCompletion assembles a non-streaming answer.
func readCompletion(cc *openai.ChatCompletion) (Response, error) {
	if cc == nil || len(cc.Choices) == 0 {
		return Response{}, fmt.Errorf("decode model answer: no choices")
	}
	ch := cc.Choices[0]
	var acc accumulator
	acc.text.WriteString(ch.Message.Content)
	for _, tc := range ch.Message.ToolCalls {
		args, object := argsOf(tc.Function.Arguments, tc.Function.JSON.Arguments)
		acc.add(callDelta{id: tc.ID, name: tc.Function.Name, args: args, object: object})
		acc.last = nil // each entry of a complete message is its own call
	}
	return acc.response(Response{Usage: usageOf(cc.Usage, cc.JSON.Usage), FinishReason: ch.FinishReason}), nil
}

// readStream assembles a streamed answer; text deltas go to onText.
func readStream(s *ssestream.Stream[openai.ChatCompletionChunk], onText func(string)) (Response, error) {
	var acc accumulator
	resp := Response{Streamed: true}
	for s.Next() {
		chunk := s.Current()
		if u := usageOf(chunk.Usage, chunk.JSON.Usage); u != (Usage{}) {
			resp.Usage = u
		}
		for _, ch := range chunk.Choices {
			if ch.FinishReason != "" {
				resp.FinishReason = ch.FinishReason
			}
			d := ch.Delta
			whole := false
			if !ch.JSON.Delta.Valid() {
				// Some servers put the whole message in the last chunk.
				m, ok := ch.JSON.ExtraFields["message"]
				if !ok || json.Unmarshal([]byte(m.Raw()), &d) != nil {
					continue
				}
				whole = true
			}
			if d.Content != "" {
				acc.text.WriteString(d.Content)
				if onText != nil {
					onText(d.Content)
				}
			}
			for _, tc := range d.ToolCalls {
				args, object := argsOf(tc.Function.Arguments, tc.Function.JSON.Arguments)
				acc.add(callDelta{index: tc.Index, hasIndex: tc.JSON.Index.Valid() && !whole, id: tc.ID, name: tc.Function.Name,
					args: args, object: object})
				if whole {
					acc.last = nil
				}
			}
		}
	}
	if err := s.Err(); err != nil {
		return Response{}, fmt.Errorf("read model stream: %w", err)
	}
	return acc.response(resp), nil
}

// exchange is what the middleware saw of one HTTP exchange.
type exchange struct {
	sent int64          // request body bytes
	resp *http.Response // the last response (its body re-readable on errors)
	// plain: a streamed request was answered with plain JSON.
	plain bool
	// tail holds the last bytes of a streamed body: openai-go ends a
	// stream alike on [DONE] and on the end of the body, so whether the
	// server said [DONE] is read from what came last.
	tail *tailReader
}

// done reports whether the stream's last event was [DONE].
func (x *exchange) done() bool {
	return x.plain || (x.tail != nil && bytes.HasSuffix(bytes.TrimRight(x.tail.last, "\r\n "), []byte("data: [DONE]")))
}

// tailReader passes a body through and keeps its last bytes.
type tailReader struct {
	r    io.Reader
	last []byte
}

func (t *tailReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.last = append(t.last, p[:n]...)
		if len(t.last) > 64 {
			t.last = append(t.last[:0], t.last[len(t.last)-64:]...)
		}
	}
	return n, err
}

// middleware bounds response bodies, records the request size and the
// response, and, for a streamed request, turns a JSON answer into a
// one-event stream.
func (x *exchange) middleware(stream bool) option.Middleware {
	return func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		x.sent = req.ContentLength
		resp, err := next(req)
		if err != nil || resp == nil {
			return resp, err
		}
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, maxBody), resp.Body}
		x.resp = resp
		if stream && resp.StatusCode == http.StatusOK {
			x.tail = &tailReader{r: resp.Body}
			resp.Body = struct {
				io.Reader
				io.Closer
			}{x.tail, resp.Body}
			if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					return nil, fmt.Errorf("read model answer: %w", err)
				}
				var buf bytes.Buffer
				buf.WriteString("data: ")
				buf.Write(bytes.ReplaceAll(bytes.TrimSpace(b), []byte("\n"), []byte(" ")))
				buf.WriteString("\n\ndata: [DONE]\n\n")
				resp.Body = io.NopCloser(&buf)
				resp.Header.Set("Content-Type", "text/event-stream")
				x.plain = true
			}
		}
		return resp, nil
	}
}
