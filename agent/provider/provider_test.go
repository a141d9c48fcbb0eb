package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/agent/provider"
	pt "github.com/warrenhq/warren/agent/provider/providertest"
)

var echoTool = provider.Tool{Name: "echo", Parameters: json.RawMessage(`{"type":"object"}`)}

func client(s *pt.Server, p provider.Profile) (*provider.Client, *[]time.Duration) {
	var slept []time.Duration
	c := &provider.Client{BaseURL: s.BaseURL(), APIKey: "sk-test", Profile: p,
		Sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }}
	return c, &slept
}

func ask(text string) provider.Request {
	return provider.Request{Model: "m", Tools: []provider.Tool{echoTool}, Messages: []provider.Message{{Role: "user", Content: text}}}
}

func TestOpenAIStreamAssemblesSplitArgumentsAndUsage(t *testing.T) {
	s := pt.New(pt.OpenAI, pt.Reply{Text: "running two tools", Calls: []pt.Call{{Name: "echo", Args: `{"text":"a"}`}, {Name: "echo", Args: `{"text":"b"}`}}})
	defer s.Close()
	c, _ := client(s, provider.DefaultProfile(s.BaseURL(), "m"))
	var deltas []string
	resp, err := c.Chat(context.Background(), ask("hi"), func(d string) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) < 2 || strings.Join(deltas, "") != "running two tools" {
		t.Errorf("text deltas %q", deltas)
	}
	got := resp.Message.ToolCalls
	if len(got) != 2 || got[0].Arguments != `{"text":"a"}` || got[1].Arguments != `{"text":"b"}` || got[0].ID == got[1].ID {
		t.Errorf("tool calls %+v", got)
	}
	if resp.Usage.Estimated || resp.Usage.InputTokens == 0 {
		t.Errorf("usage %+v, want the stream's usage", resp.Usage)
	}
	req := s.Requests()[0]
	if _, sent := req.Raw["parallel_tool_calls"]; sent {
		t.Error("parallel_tool_calls sent to a profile that does not claim it")
	}
	if so, _ := req.Raw["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("stream_options %v", req.Raw["stream_options"])
	}
}

func TestOllamaDroppedStreamedCallsFallBackToNonStreaming(t *testing.T) {
	s := pt.New(pt.Ollama, pt.Reply{Calls: []pt.Call{{Name: "echo", Args: `{"text":"a"}`}}}, pt.Reply{Calls: []pt.Call{{Name: "echo", Args: `{"text":"a"}`}}})
	defer s.Close()
	p, err := provider.Probe(context.Background(), provider.Client{BaseURL: s.BaseURL()}, "qwen3")
	if err != nil {
		t.Fatal(err)
	}
	if p.StreamToolCalls || p.ToolCallIDs || p.ArgumentsType != "object" || p.UsageInStream || p.Server != "ollama" {
		t.Fatalf("profile %+v", p)
	}
	c, _ := client(s, p)
	resp, err := c.Chat(context.Background(), ask("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tc := resp.Message.ToolCalls
	if len(tc) != 1 || tc[0].ID == "" || tc[0].Arguments != `{"text":"a"}` {
		t.Fatalf("calls %+v: want one with a made-up id and the object as a string", tc)
	}
	if s.Requests()[0].Stream {
		t.Error("a request with tools was streamed to a server that drops streamed tool calls")
	}
}

func TestNoUsageIsEstimatedAndThinkIsNotReplayed(t *testing.T) {
	s := pt.New(pt.Ollama, pt.Reply{Text: "hello there"})
	defer s.Close()
	c, _ := client(s, provider.DefaultProfile(s.BaseURL(), "m"))
	req := provider.Request{Model: "m", Messages: []provider.Message{
		{Role: "user", Content: "a"}, {Role: "assistant", Content: "<think>secret plan</think>\nanswer"}, {Role: "user", Content: "b"}}}
	resp, err := c.Chat(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Usage.Estimated || resp.Usage.InputTokens == 0 || resp.Usage.OutputTokens == 0 {
		t.Errorf("usage %+v: want an estimate marked estimated", resp.Usage)
	}
	if c := s.Requests()[0].Messages[1]["content"]; c != "answer" {
		t.Errorf("replayed assistant content %q: the <think> block must not go back", c)
	}
}

func TestRateLimitAndServerErrorsAreRetried(t *testing.T) {
	s := pt.New(pt.OpenAI, pt.Reply{Status: 429, RetryAfter: "3", Body: "slow down"},
		pt.Reply{Status: 502, Body: "bad gateway"}, pt.Reply{Status: 503}, pt.Reply{Text: "ok"})
	defer s.Close()
	c, slept := client(s, provider.DefaultProfile(s.BaseURL(), "m"))
	resp, err := c.Chat(context.Background(), ask("hi"), nil)
	if err != nil || resp.Message.Content != "ok" {
		t.Fatalf("%v %q", err, resp.Message.Content)
	}
	want := []time.Duration{3 * time.Second, time.Second, 2 * time.Second}
	if fmt.Sprint(*slept) != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v (Retry-After, then doubling backoff)", *slept, want)
	}
	s.Push(pt.Reply{Status: 400, Body: "bad request"})
	if _, err := c.Chat(context.Background(), ask("hi"), nil); err == nil || len(*slept) != 3 {
		t.Errorf("a 400 was retried or accepted: %v", err)
	}
}

func TestContextLengthErrorIsRecognised(t *testing.T) {
	s := pt.New(pt.OpenAI, pt.Reply{Status: 400, Body: "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens."})
	defer s.Close()
	c, _ := client(s, provider.DefaultProfile(s.BaseURL(), "m"))
	_, err := c.Chat(context.Background(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrContextLength) {
		t.Fatalf("err %v, want ErrContextLength", err)
	}
}

func TestSilentContextCapIsWarned(t *testing.T) {
	s := pt.New(pt.OpenAI, pt.Reply{Text: "ok", PromptTokens: 2048})
	defer s.Close()
	c, _ := client(s, provider.DefaultProfile(s.BaseURL(), "m"))
	resp, err := c.Chat(context.Background(), ask(strings.Repeat("long prompt ", 4000)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "cutting the conversation") {
		t.Errorf("warnings %q", resp.Warnings)
	}
}

// Deltas as some servers send them: no index, no id, one call per delta,
// arguments split, then a second call started by its name.
func TestDeltasWithoutIndexOrID(t *testing.T) {
	chunks := []string{
		`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"echo","arguments":"{\"te"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"xt\":1}"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"echo","arguments":{"text":2}}}]}}]}`,
		`{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks {
			fmt.Fprintf(w, "data: %s\n\n", c)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	c := &provider.Client{BaseURL: srv.URL, Profile: provider.DefaultProfile(srv.URL, "m")}
	resp, err := c.Chat(context.Background(), ask("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tc := resp.Message.ToolCalls
	if len(tc) != 2 || tc[0].Arguments != `{"text":1}` || tc[1].Arguments != `{"text":2}` || tc[0].ID == "" || tc[0].ID == tc[1].ID {
		t.Fatalf("calls %+v", tc)
	}
}

func TestDoctorNamesTheFixForVLLMAndLlamaCpp(t *testing.T) {
	for style, want := range map[pt.Style]string{pt.VLLM: "--enable-auto-tool-choice", pt.LlamaCpp: "--jinja"} {
		s := pt.New(style)
		p, err := provider.Probe(context.Background(), provider.Client{BaseURL: s.BaseURL()}, "m")
		s.Close()
		if err != nil || p.Tools || !strings.Contains(p.Fix, want) {
			t.Errorf("style %d: %v, profile %+v", style, err, p)
		}
	}
	s := pt.New(pt.OpenAI)
	defer s.Close()
	p, err := provider.Probe(context.Background(), provider.Client{BaseURL: s.BaseURL()}, "gpt")
	if err != nil || !p.Tools || !p.StreamToolCalls || !p.ToolCallIDs || !p.ParallelToolCalls || !p.UsageInStream || p.Server != "openai" || p.Fix != "" {
		t.Errorf("openai profile %+v %v", p, err)
	}
}

// Answers that openai-go's types do not describe: an error given as a bare
// string (Ollama), a plain JSON answer to a streamed request, and a last
// chunk that carries the whole message instead of a delta.
func TestAnswersOutsideTheStandardShape(t *testing.T) {
	var answer func(w http.ResponseWriter)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
			t.Errorf("authorization %q", got)
		}
		answer(w)
	}))
	defer srv.Close()
	c := &provider.Client{BaseURL: srv.URL + "/v1", APIKey: "sk-test", Profile: provider.DefaultProfile(srv.URL, "m")}

	answer = func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(404)
		fmt.Fprint(w, `{"error":"model \"m\" not found, try pulling it first"}`)
	}
	_, err := c.Chat(context.Background(), ask("hi"), nil)
	var se *provider.StatusError
	if !errors.As(err, &se) || se.Status != 404 || !strings.Contains(se.Message, "try pulling it first") {
		t.Errorf("bare-string error: %v", err)
	}

	answer = func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"plain",
			"tool_calls":[{"function":{"name":"echo","arguments":{"text":"x"}}}]},"finish_reason":"tool_calls"}]}`)
	}
	var text string
	resp, err := c.Chat(context.Background(), ask("hi"), func(d string) { text += d })
	if err != nil || text != "plain" || resp.Streamed || len(resp.Message.ToolCalls) != 1 ||
		resp.Message.ToolCalls[0].Arguments != `{"text":"x"}` || !resp.Usage.Estimated {
		t.Errorf("plain JSON to a streamed request: %v %q %+v", err, text, resp)
	}

	answer = func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
		fmt.Fprint(w, "data: {\"choices\":[{\"message\":{\"content\":\"b\",\"tool_calls\":[{\"id\":\"call_abc\",\"function\":{\"name\":\"echo\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
	resp, err = c.Chat(context.Background(), ask("hi"), nil)
	if err != nil || resp.Message.Content != "ab" || len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].ID != "call_abc" {
		t.Errorf("message in the last chunk: %v %+v", err, resp)
	}
}

// A stream that ends before the answer is finished (no finish_reason, no
// [DONE]), cleanly or by a dropped connection, is retried; the answer is
// the complete one of the retry, and a stream cut every time is an error
// that says so, never a partial answer.
func TestStreamCutShortIsRetriedThenAnError(t *testing.T) {
	full := "the whole answer, in three pieces"
	for _, cut := range []pt.Reply{{Text: full, Cut: true}, {Text: full, Drop: true}} {
		s := pt.New(pt.OpenAI, cut, pt.Reply{Text: full})
		c, slept := client(s, provider.DefaultProfile(s.BaseURL(), "m"))
		resp, err := c.Chat(context.Background(), ask("hi"), nil)
		if err != nil || resp.Message.Content != full {
			t.Errorf("cut %v drop %v: %v, answer %q: want the retry's whole answer", cut.Cut, cut.Drop, err, resp.Message.Content)
		}
		if n := len(s.Requests()); n != 2 || len(*slept) != 1 {
			t.Errorf("cut %v drop %v: %d requests, %d waits: want one retry", cut.Cut, cut.Drop, n, len(*slept))
		}
		s.Push(cut, cut, cut, cut, cut)
		resp, err = c.Chat(context.Background(), ask("hi"), nil)
		if err == nil || !strings.Contains(err.Error(), "ended before the answer was finished") {
			t.Errorf("cut %v drop %v: every stream cut: err %v, answer %q", cut.Cut, cut.Drop, err, resp.Message.Content)
		}
		s.Close()
	}
}

// A server that drops tool calls when streaming, never probed: the empty
// streamed reply to a request with tools is detected in the run, asked
// again without streaming, and the profile that says so is handed on to
// be stored. Usage counts both calls.
func TestDroppedStreamedCallsAreDetectedWithoutDoctor(t *testing.T) {
	call := pt.Reply{Calls: []pt.Call{{Name: "echo", Args: `{"text":"a"}`}}}
	s := pt.New(pt.Ollama, call, call, call)
	defer s.Close()
	c, _ := client(s, provider.DefaultProfile(s.BaseURL(), "m"))
	var stored []provider.Profile
	c.OnProfile = func(p provider.Profile) { stored = append(stored, p) }
	resp, err := c.Chat(context.Background(), ask("hi"), nil)
	if err != nil || len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Name != "echo" {
		t.Fatalf("%v, calls %+v: want the call the streamed answer dropped", err, resp.Message.ToolCalls)
	}
	reqs := s.Requests()
	if len(reqs) != 2 || !reqs[0].Stream || reqs[1].Stream {
		t.Fatalf("%d requests: want a streamed one, then the same without streaming", len(reqs))
	}
	if len(stored) != 1 || stored[0].StreamToolCalls {
		t.Errorf("profiles handed on: %+v: want one with stream_tool_calls false", stored)
	}
	if len(resp.Warnings) == 0 || !strings.Contains(resp.Warnings[0], "dropped") {
		t.Errorf("warnings %q", resp.Warnings)
	}
	if resp.Usage.InputTokens < 2*int64(len("hi")) {
		t.Errorf("usage %+v", resp.Usage)
	}
	// The next request with tools is not streamed at all.
	if _, err := c.Chat(context.Background(), ask("again"), nil); err != nil || s.Requests()[2].Stream {
		t.Errorf("after detection: %v, streamed %v", err, s.Requests()[2].Stream)
	}
}

// Doctor finds whether the model takes images: a model without vision
// refuses a request with a picture; the default profile sends none.
func TestDoctorProbesImages(t *testing.T) {
	for _, noImages := range []bool{false, true} {
		s := pt.New(pt.OpenAI)
		s.NoImages = noImages
		p, err := provider.Probe(context.Background(), provider.Client{BaseURL: s.BaseURL()}, "m")
		s.Close()
		if err != nil || p.Images == noImages {
			t.Errorf("no images %v: profile images %v, %v", noImages, p.Images, err)
		}
	}
	if provider.DefaultProfile("u", "m").Images {
		t.Error("an endpoint never probed is assumed to take images")
	}
}
