// Package providertest is a scripted OpenAI-compatible Chat Completions
// server for tests. It replays conversations in the stream formats of
// OpenAI, Ollama, vLLM and llama.cpp's server, quirks included, and
// answers warren's capability probes the way each of them would.
package providertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Style is the server software imitated.
type Style int

// Styles.
const (
	// OpenAI: SSE deltas with index and id, arguments split over several
	// deltas, usage chunk on include_usage, parallel_tool_calls accepted.
	OpenAI Style = iota
	// Ollama: tool calls without index or id and with arguments as an
	// object; streamed requests with tools lose their tool calls; no
	// usage in streams; parallel_tool_calls ignored.
	Ollama
	// VLLM without --enable-auto-tool-choice: any request with tools is
	// refused (400).
	VLLM
	// LlamaCpp without --jinja: any request with tools is refused (500).
	LlamaCpp
)

// Call is a tool call the scripted model makes.
type Call struct {
	Name string
	// Args is the raw argument text; it may be invalid JSON on purpose.
	Args string
}

// Reply is one scripted answer.
type Reply struct {
	Text  string
	Calls []Call
	// Status, when not 0 or 200, is returned with Body as an error.
	Status     int
	Body       string
	RetryAfter string
	// PromptTokens overrides the reported prompt tokens (a silent cap).
	PromptTokens int64
	// Delay is slept between text deltas (streams that arrive slowly).
	Delay time.Duration
	// Cut ends a streamed answer after its first text delta, with no
	// finish_reason and no [DONE]: the server ends the response and closes
	// the connection mid-answer (a proxy's timeout, a crashed worker).
	Cut bool
	// Drop is Cut without a proper end: the connection is closed in the
	// middle of the chunked response body.
	Drop bool
	// Hold, when set, makes a streamed answer wait for it before its last
	// text delta (or until the client goes away): tests see the first
	// deltas arrive while the answer is provably not finished.
	Hold <-chan struct{}
}

// Request is what the server received.
type Request struct {
	Raw      map[string]any
	Messages []map[string]any
	Tools    []string
	// Images are the URLs of the image_url content parts of the
	// messages, in order.
	Images   []string
	Stream   bool
	Received time.Time
}

// Server is a scripted endpoint. Script entries are consumed one per chat
// request (probes excluded); when the script runs out the model answers
// "done".
type Server struct {
	*httptest.Server
	Style Style
	// NoImages makes the model one without vision: a request with an
	// image part is refused (400), as vLLM and OpenAI refuse it.
	NoImages bool

	// mu protects the fields below.
	mu       sync.Mutex
	script   []Reply
	requests []Request
	// LastDelta is when the last byte of the previous answer was written.
	lastDelta time.Time
	gaps      []time.Duration
	// Script, when set, picks the reply instead of the list (it sees every
	// non-probe request).
	Script func(Request) Reply
}

// New starts a server of the given style that replays script.
func New(style Style, script ...Reply) *Server {
	s := &Server{Style: style, script: script}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	return s
}

// URL of the API root (…/v1).
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Requests returns the chat requests received so far (probes excluded).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Gaps returns, for each request after the first, the time between the
// last byte of the previous answer and the arrival of the request.
func (s *Server) Gaps() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.gaps...)
}

// Push appends replies to the script.
func (s *Server) Push(r ...Reply) {
	s.mu.Lock()
	s.script = append(s.script, r...)
	s.mu.Unlock()
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	var raw map[string]any
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, 400)
		return
	}
	req := Request{Raw: raw, Received: now}
	req.Stream, _ = raw["stream"].(bool)
	if ms, ok := raw["messages"].([]any); ok {
		for _, m := range ms {
			mm, _ := m.(map[string]any)
			req.Messages = append(req.Messages, mm)
			parts, _ := mm["content"].([]any)
			for _, part := range parts {
				pm, _ := part.(map[string]any)
				if iu, _ := pm["image_url"].(map[string]any); pm["type"] == "image_url" && iu != nil {
					u, _ := iu["url"].(string)
					req.Images = append(req.Images, u)
				}
			}
		}
	}
	if len(req.Images) > 0 && s.NoImages {
		writeError(w, 400, "Invalid content type. image_url is only supported by certain models.")
		return
	}
	if ts, ok := raw["tools"].([]any); ok {
		for _, t := range ts {
			fn, _ := t.(map[string]any)["function"].(map[string]any)
			name, _ := fn["name"].(string)
			req.Tools = append(req.Tools, name)
		}
	}
	if len(req.Tools) > 0 {
		switch s.Style {
		case VLLM:
			writeError(w, 400, `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`)
			return
		case LlamaCpp:
			writeError(w, 500, `tools param requires --jinja flag`)
			return
		}
	}
	if _, ok := raw["parallel_tool_calls"]; ok && s.Style != OpenAI && s.Style != Ollama {
		writeError(w, 400, "unknown parameter parallel_tool_calls")
		return
	}
	var reply Reply
	if probe := probeReply(req); probe != nil {
		reply = *probe
	} else {
		s.mu.Lock()
		if !s.lastDelta.IsZero() {
			s.gaps = append(s.gaps, now.Sub(s.lastDelta))
		}
		s.requests = append(s.requests, req)
		switch {
		case s.Script != nil:
			fn := s.Script
			s.mu.Unlock()
			reply = fn(req)
			s.mu.Lock()
		case len(s.script) > 0:
			reply, s.script = s.script[0], s.script[1:]
		default:
			reply = Reply{Text: "done"}
		}
		s.mu.Unlock()
	}
	if reply.Status != 0 && reply.Status != 200 {
		if reply.RetryAfter != "" {
			w.Header().Set("Retry-After", reply.RetryAfter)
		}
		writeError(w, reply.Status, reply.Body)
		return
	}
	prompt := reply.PromptTokens
	if prompt == 0 {
		b, _ := json.Marshal(raw)
		prompt = int64(len(b)) / 4
	}
	if req.Stream {
		if !s.stream(w, r, req, reply, prompt) {
			return
		}
	} else {
		s.complete(w, reply, prompt)
	}
	s.mu.Lock()
	s.lastDelta = time.Now()
	s.mu.Unlock()
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
	w.Write(b)
}

func (s *Server) usage(prompt int64, reply Reply) map[string]any {
	return map[string]any{"prompt_tokens": prompt, "completion_tokens": int64(len(reply.Text))/4 + 1,
		"total_tokens": prompt + int64(len(reply.Text))/4 + 1, "prompt_tokens_details": map[string]any{"cached_tokens": 0}}
}

func (s *Server) calls(reply Reply) []any {
	var out []any
	for i, c := range reply.Calls {
		fn := map[string]any{"name": c.Name}
		if s.Style == Ollama && json.Valid([]byte(c.Args)) {
			fn["arguments"] = json.RawMessage(c.Args)
			out = append(out, map[string]any{"function": fn})
			continue
		}
		fn["arguments"] = c.Args
		out = append(out, map[string]any{"index": i, "id": "call_" + strconv.Itoa(i) + "x", "type": "function", "function": fn})
	}
	return out
}

func (s *Server) complete(w http.ResponseWriter, reply Reply, prompt int64) {
	msg := map[string]any{"role": "assistant", "content": reply.Text}
	finish := "stop"
	if len(reply.Calls) > 0 {
		msg["tool_calls"] = s.calls(reply)
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   s.usage(prompt, reply)})
}

// stream writes a streamed answer; false means the client went away.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req Request, reply Reply, prompt int64) bool {
	w.Header().Set("Content-Type", "text/event-stream")
	if reply.Cut {
		w.Header().Set("Connection", "close")
	}
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	pieces := split(reply.Text, 3)
	for i, piece := range pieces {
		if reply.Delay > 0 {
			time.Sleep(reply.Delay)
		}
		if reply.Hold != nil && i == len(pieces)-1 {
			select {
			case <-reply.Hold:
			case <-r.Context().Done():
				return false
			}
		}
		send(chunk(map[string]any{"content": piece}, nil))
		if reply.Drop {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
				}
			}
			return false
		}
		if reply.Cut {
			return true
		}
	}
	finish := "stop"
	switch {
	case len(reply.Calls) > 0 && s.Style == Ollama:
		// Ollama's streamed answers with tools lose the calls.
	case len(reply.Calls) > 0:
		finish = "tool_calls"
		for i, c := range reply.Calls {
			// First the id and name, then the arguments in pieces.
			send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": "call_" + strconv.Itoa(i) + "s",
				"type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil))
			for _, piece := range split(c.Args, 3) {
				send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i,
					"function": map[string]any{"arguments": piece}}}}, nil))
			}
		}
	}
	send(chunk(map[string]any{}, finish))
	if so, _ := req.Raw["stream_options"].(map[string]any); so != nil && so["include_usage"] == true && s.Style == OpenAI {
		send(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": []any{}, "usage": s.usage(prompt, reply)})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	return true
}

// split cuts s into at most n pieces of about equal size (by bytes; the
// scripts are ASCII).
func split(s string, n int) []string {
	if s == "" {
		return nil
	}
	size := (len(s) + n - 1) / n
	var out []string
	for len(s) > size {
		out = append(out, s[:size])
		s = s[size:]
	}
	return append(out, s)
}

// probeReply answers warren's capability probes (a request offering the
// tool warren_probe): call it, twice when asked for two calls.
func probeReply(req Request) *Reply {
	if len(req.Tools) != 1 || req.Tools[0] != "warren_probe" {
		if len(req.Messages) > 0 {
			if strings.HasPrefix(textOf(req.Messages[len(req.Messages)-1]), "warren probe:") {
				return &Reply{Text: "ok"}
			}
		}
		return nil
	}
	last, _ := req.Messages[len(req.Messages)-1]["content"].(string)
	r := &Reply{Calls: []Call{{Name: "warren_probe", Args: `{"n":1}`}}}
	if strings.Contains(last, "twice") {
		r.Calls = append(r.Calls, Call{Name: "warren_probe", Args: `{"n":2}`})
	}
	return r
}

// textOf is a message's text: its content string, or its text parts.
func textOf(m map[string]any) string {
	if c, ok := m["content"].(string); ok {
		return c
	}
	parts, _ := m["content"].([]any)
	var b strings.Builder
	for _, part := range parts {
		if pm, _ := part.(map[string]any); pm["type"] == "text" {
			t, _ := pm["text"].(string)
			b.WriteString(t)
		}
	}
	return b.String()
}
