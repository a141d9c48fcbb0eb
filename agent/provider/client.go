package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Client calls one OpenAI-compatible endpoint with one profile, through
// github.com/openai/openai-go/v3 (see openai.go for what warren adds). It
// is not safe for concurrent use: Chat updates the profile when it learns
// that the endpoint drops streamed tool calls.
type Client struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1 or
	// http://127.0.0.1:11434/v1.
	BaseURL string
	// APIKey is sent as a bearer token; never logged.
	APIKey string
	// Profile drives the fallbacks.
	Profile Profile
	// HTTP is the HTTP client; nil means openai-go's (no global timeout:
	// streams can be long; the context bounds them).
	HTTP *http.Client
	// Retries is how often a 429 or 5xx is retried; 0 means 4.
	Retries int
	// Backoff is the first wait before retrying a 5xx (doubling); 0 means
	// 500 ms. A 429's Retry-After wins when present.
	Backoff time.Duration
	// MaxRetryAfter caps a Retry-After the server asks for; 0 means 60 s.
	MaxRetryAfter time.Duration
	// Sleep waits; tests make it instant. nil means a context-aware sleep.
	Sleep func(ctx context.Context, d time.Duration) error
	// OnProfile, when set, is given the profile after Chat learned
	// something of the endpoint in a run (that it drops streamed tool
	// calls), to be stored.
	OnProfile func(Profile)

	api    *openai.ChatCompletionService
	apiFor string // the BaseURL and key api was made for
	// tools are the converted toolsFor (the same slice, not a copy: the
	// agent's offered tools do not change in place).
	toolsFor []Tool
	tools    []openai.ChatCompletionToolUnionParam
}

// Chat sends req and returns the model's message. Text deltas go to
// onText as they arrive (it may be nil). Requests that offer tools to a
// server that drops streamed tool calls are sent without streaming.
func (c *Client) Chat(ctx context.Context, req Request, onText func(string)) (Response, error) {
	stream := c.Profile.StreamToolCalls || len(req.Tools) == 0
	resp, err := c.chatOnce(ctx, req, stream, onText)
	if err != nil || !stream || len(req.Tools) == 0 || len(resp.Message.ToolCalls) > 0 ||
		(resp.FinishReason != "tool_calls" && strings.TrimSpace(StripThink(resp.Message.Content)) != "") {
		return resp, err
	}
	// A streamed request with tools got no call and either no text or a
	// finish_reason of tool_calls: some servers drop tool calls when
	// streaming. Ask again without streaming; if that brings the calls,
	// the endpoint drops them, which is remembered (OnProfile stores it
	// as 'chat doctor' would).
	again, err := c.chatOnce(ctx, req, false, nil)
	if err != nil {
		return Response{}, err
	}
	again.Usage = addUsage(resp.Usage, again.Usage) // both calls were made
	again.Warnings = append(resp.Warnings, again.Warnings...)
	if len(again.Message.ToolCalls) > 0 {
		c.Profile.StreamToolCalls = false
		again.Warnings = append(again.Warnings, "the endpoint dropped streamed tool calls: requests with tools are sent without "+
			"streaming from now on (remembered in its profile, as 'warren chat doctor' would)")
		if c.OnProfile != nil {
			c.OnProfile(c.Profile)
		}
	} else if onText != nil && again.Message.Content != "" {
		onText(again.Message.Content)
	}
	return again, nil
}

func addUsage(a, b Usage) Usage {
	return Usage{InputTokens: a.InputTokens + b.InputTokens, OutputTokens: a.OutputTokens + b.OutputTokens,
		CachedTokens: a.CachedTokens + b.CachedTokens, Estimated: a.Estimated || b.Estimated}
}

// client returns the openai-go client, made once per endpoint and key.
func (c *Client) client() *openai.ChatCompletionService {
	key := c.BaseURL + "\x00" + c.APIKey
	if c.api == nil || c.apiFor != key {
		opts := []option.RequestOption{option.WithBaseURL(c.BaseURL), option.WithAPIKey(c.APIKey),
			option.WithMaxRetries(0)} // retries are warren's: see chatOnce
		if c.HTTP != nil {
			opts = append(opts, option.WithHTTPClient(c.HTTP))
		}
		api := openai.NewChatCompletionService(opts...)
		c.api, c.apiFor = &api, key
	}
	return c.api
}

func (c *Client) chatOnce(ctx context.Context, req Request, stream bool, onText func(string)) (Response, error) {
	params := c.params(req, stream)
	retries := c.Retries
	if retries == 0 {
		retries = 4
	}
	backoff := c.Backoff
	if backoff == 0 {
		backoff = 500 * time.Millisecond
	}
	cuts := 0 // answers that ended before they were finished
	for attempt := 0; ; attempt++ {
		var x exchange
		opts := []option.RequestOption{option.WithMiddleware(x.middleware(stream))}
		var resp Response
		var err error
		if stream {
			resp, err = readStream(c.client().NewStreaming(ctx, params, opts...), onText)
			resp.Streamed = !x.plain
		} else {
			var cc *openai.ChatCompletion
			if cc, err = c.client().New(ctx, params, opts...); err == nil {
				resp, err = readCompletion(cc)
				if err == nil && onText != nil && resp.Message.Content != "" {
					onText(resp.Message.Content)
				}
			}
		}
		if err == nil && stream && resp.FinishReason == "" && !x.done() {
			err = &cutError{text: len(resp.Message.Content)}
		}
		if err == nil {
			if cuts > 0 {
				resp.Warnings = append(resp.Warnings, fmt.Sprintf("the model's answer stream was cut short %d time(s) and the answer was asked for again "+
					"(text shown before this may repeat)", cuts))
			}
			if resp.Usage == (Usage{}) {
				resp.Usage = estimate(x.sent, resp.Message)
			}
			resp.Warnings = append(resp.Warnings, c.capWarning(x.sent, resp.Usage)...)
			return resp, nil
		}
		if ctx.Err() != nil {
			return Response{}, ctx.Err()
		}
		if cut := cutShort(err, x.resp); cut != nil {
			// An answer that ended before it was finished is not an
			// answer: ask again, as for a 5xx, and fail if it keeps
			// happening.
			cuts++
			if attempt >= retries {
				return Response{}, fmt.Errorf("model endpoint %s: %w, %d times in a row: the endpoint or a proxy in front of it "+
					"ends answers early (check its timeouts and logs)", c.BaseURL, cut, cuts)
			}
			if err := c.sleep(ctx, backoff<<attempt); err != nil {
				return Response{}, err
			}
			continue
		}
		serr := statusError(err, x.resp)
		if serr == nil {
			return Response{}, fmt.Errorf("reach model endpoint %s: %w", c.BaseURL, err)
		}
		if serr.isContextLength() {
			return Response{}, fmt.Errorf("%w: %s", ErrContextLength, serr.Message)
		}
		wait, retry := backoff<<attempt, false
		switch {
		case serr.Status == http.StatusTooManyRequests:
			retry = true
			if ra, ok := retryAfter(serr.retryAfter); ok {
				wait = ra
			}
		case serr.Status >= 500:
			retry = true
		}
		if !retry || attempt >= retries {
			return Response{}, serr
		}
		if limit := c.maxRetryAfter(); wait > limit {
			wait = limit
		}
		if err := c.sleep(ctx, wait); err != nil {
			return Response{}, err
		}
	}
}

// cutError is an answer that ended before it was finished.
type cutError struct {
	text int  // bytes of text received before the end, -1: unknown
	eof  bool // the connection was closed in the middle of the body
}

func (e *cutError) Error() string {
	if e.eof {
		return "the answer stream ended before the answer was finished: the connection was closed in the middle of it"
	}
	return fmt.Sprintf("the answer stream ended before the answer was finished (no finish_reason and no [DONE], after %d bytes of text)", e.text)
}

// cutShort recognises an answer cut short: a stream without an end, or a
// body that stopped in the middle of an answer the server had accepted.
func cutShort(err error, resp *http.Response) *cutError {
	var cut *cutError
	if errors.As(err, &cut) {
		return cut
	}
	if resp != nil && resp.StatusCode == http.StatusOK && errors.Is(err, io.ErrUnexpectedEOF) {
		return &cutError{text: -1, eof: true}
	}
	return nil
}

func (c *Client) maxRetryAfter() time.Duration {
	if c.MaxRetryAfter > 0 {
		return c.MaxRetryAfter
	}
	return 60 * time.Second
}

func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if c.Sleep != nil {
		return c.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, time.Until(t)), true
	}
	return 0, false
}

// statusError turns a failed request into a StatusError, or nil when the
// endpoint never answered. openai-go decodes the standard error object
// ({"error": {"message", "code"}}); servers that send {"error": "text"}
// or plain text are read from the response the middleware kept.
func statusError(err error, resp *http.Response) *StatusError {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		e := &StatusError{Status: apiErr.StatusCode, Code: apiErr.Code, Message: apiErr.Message}
		if apiErr.Response != nil {
			e.retryAfter = apiErr.Response.Header.Get("Retry-After")
		}
		if e.Message == "" {
			e.Message = strings.TrimSpace(apiErr.RawJSON())
		}
		return e
	}
	if resp == nil || resp.StatusCode < 400 {
		return nil
	}
	e := &StatusError{Status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	var s string
	if json.Unmarshal(b, &body) == nil && json.Unmarshal(body.Error, &s) == nil {
		e.Message = s
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(b[:min(len(b), 500)]))
	}
	return e
}

// estimate guesses the usage of a call whose server reported none: about
// four bytes a token.
func estimate(sent int64, m Message) Usage {
	out := len(m.Content)
	for _, tc := range m.ToolCalls {
		out += len(tc.Name) + len(tc.Arguments)
	}
	return Usage{InputTokens: (sent + 3) / 4, OutputTokens: int64(out+3) / 4, Estimated: true}
}

// capWarning detects a server that silently cut the prompt: it reports far
// fewer prompt tokens than the prompt can have, at or under its known
// window (Ollama's num_ctx).
func (c *Client) capWarning(sent int64, u Usage) []string {
	if u.Estimated || u.InputTokens == 0 {
		return nil
	}
	est := sent / 4
	if est > 2*u.InputTokens && est-u.InputTokens > 512 {
		w := c.Profile.ContextWindow
		fix := ""
		if c.Profile.Server == "ollama" {
			fix = ": raise the context with OLLAMA_CONTEXT_LENGTH=32768 (or num_ctx in a Modelfile) and restart Ollama"
		}
		msg := fmt.Sprintf("the server counted %d prompt tokens for a prompt of about %d: it is cutting the conversation silently", u.InputTokens, est)
		if w > 0 {
			msg += fmt.Sprintf(" (its context window is %d tokens)", w)
		}
		return []string{msg + fix}
	}
	return nil
}

// IsContextLength reports whether err says the prompt was too long.
func IsContextLength(err error) bool { return errors.Is(err, ErrContextLength) }
