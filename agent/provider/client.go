package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Client calls one OpenAI-compatible endpoint with one profile.
//
// It is written on net/http rather than github.com/openai/openai-go/v3
// because the module could not be fetched when it was written; the wire
// types live in wire.go only, so that swapping the transport is local.
type Client struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1 or
	// http://127.0.0.1:11434/v1.
	BaseURL string
	// APIKey is sent as a bearer token; never logged.
	APIKey string
	// Profile drives the fallbacks.
	Profile Profile
	// HTTP is the HTTP client; nil means one without a global timeout
	// (streams can be long; the context bounds them).
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
}

// Chat sends req and returns the model's message. Text deltas go to
// onText as they arrive (it may be nil). Requests that offer tools to a
// server that drops streamed tool calls are sent without streaming.
func (c *Client) Chat(ctx context.Context, req Request, onText func(string)) (Response, error) {
	stream := c.Profile.StreamToolCalls || len(req.Tools) == 0
	resp, err := c.chatOnce(ctx, req, stream, onText)
	if err == nil && stream && resp.FinishReason == "tool_calls" && len(resp.Message.ToolCalls) == 0 {
		// The server said it called a tool but streamed none: it drops
		// streamed tool calls. Ask again without streaming, and remember.
		c.Profile.StreamToolCalls = false
		resp, err = c.chatOnce(ctx, req, false, nil)
		resp.Warnings = append(resp.Warnings, "the endpoint dropped streamed tool calls; using non-streaming requests with tools "+
			"(run 'warren chat doctor' to store this)")
	}
	return resp, err
}

func (c *Client) chatOnce(ctx context.Context, req Request, stream bool, onText func(string)) (Response, error) {
	body, err := json.Marshal(c.wireRequest(req, stream))
	if err != nil {
		return Response{}, fmt.Errorf("encode request: %w", err)
	}
	retries := c.Retries
	if retries == 0 {
		retries = 4
	}
	backoff := c.Backoff
	if backoff == 0 {
		backoff = 500 * time.Millisecond
	}
	for attempt := 0; ; attempt++ {
		httpResp, err := c.post(ctx, body)
		if err != nil {
			return Response{}, err
		}
		if httpResp.StatusCode == http.StatusOK {
			defer httpResp.Body.Close()
			var resp Response
			if stream && strings.HasPrefix(httpResp.Header.Get("Content-Type"), "text/event-stream") {
				resp, err = readStream(httpResp.Body, onText)
			} else {
				resp, err = readCompletion(httpResp.Body)
				if err == nil && onText != nil && resp.Message.Content != "" {
					onText(resp.Message.Content)
				}
			}
			if err != nil {
				return Response{}, err
			}
			if resp.Usage == (Usage{}) {
				resp.Usage = estimate(body, resp.Message)
			}
			resp.Warnings = append(resp.Warnings, c.capWarning(body, resp.Usage)...)
			return resp, nil
		}
		serr := statusError(httpResp)
		if serr.isContextLength() {
			return Response{}, fmt.Errorf("%w: %s", ErrContextLength, serr.Message)
		}
		wait, retry := backoff<<attempt, false
		switch {
		case httpResp.StatusCode == http.StatusTooManyRequests:
			retry = true
			if ra, ok := retryAfter(httpResp.Header.Get("Retry-After")); ok {
				wait = ra
			}
		case httpResp.StatusCode >= 500:
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

func (c *Client) post(ctx context.Context, body []byte) (*http.Response, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("model request: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if c.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("reach model endpoint %s: %w", c.BaseURL, err)
	}
	return resp, nil
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

// statusError reads the error body of a failed request, bounded.
func statusError(resp *http.Response) *StatusError {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &StatusError{Status: resp.StatusCode}
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && len(body.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
			Code    any    `json:"code"`
			Type    string `json:"type"`
		}
		var s string
		if json.Unmarshal(body.Error, &obj) == nil && obj.Message != "" {
			e.Message = obj.Message
			if code, ok := obj.Code.(string); ok {
				e.Code = code
			}
		} else if json.Unmarshal(body.Error, &s) == nil {
			e.Message = s
		}
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(b[:min(len(b), 500)]))
	}
	return e
}

// estimate guesses the usage of a call whose server reported none: about
// four bytes a token.
func estimate(reqBody []byte, m Message) Usage {
	out := len(m.Content)
	for _, tc := range m.ToolCalls {
		out += len(tc.Name) + len(tc.Arguments)
	}
	return Usage{InputTokens: int64(len(reqBody)+3) / 4, OutputTokens: int64(out+3) / 4, Estimated: true}
}

// capWarning detects a server that silently cut the prompt: it reports far
// fewer prompt tokens than the prompt can have, at or under its known
// window (Ollama's num_ctx).
func (c *Client) capWarning(reqBody []byte, u Usage) []string {
	if u.Estimated || u.InputTokens == 0 {
		return nil
	}
	est := int64(len(reqBody)) / 4
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
