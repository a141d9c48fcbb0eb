// Package otlp exports trace spans to an OpenTelemetry collector over
// OTLP/HTTP with protobuf bodies, configured by the standard OTEL_EXPORTER_OTLP_*
// environment.
//
// It exists instead of the OpenTelemetry project's otlptracehttp because
// that exporter's configuration package links gRPC and the gRPC gateway,
// which warren never calls: about 5 MB of idle RSS in every server, stdio
// ones included (measured with BenchmarkIdleRSS). What the exporter must do
// is small: turn the SDK's finished spans into the OTLP message, POST it,
// and retry what the protocol says to retry.
package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Config is where and how spans are sent. FromEnv reads it from the
// environment the OpenTelemetry specification defines.
type Config struct {
	URL      string            // the full traces URL, e.g. http://collector:4318/v1/traces
	Headers  map[string]string // sent with every export (an API key, a tenant)
	Timeout  time.Duration     // per export, retries included
	Gzip     bool              // compress bodies
	TLS      *tls.Config       // nil: the system's roots
	Client   *http.Client      // nil: one made from TLS
	MaxRetry time.Duration     // longest wait between retries
}

// FromEnv reads OTEL_EXPORTER_OTLP_[TRACES_]{ENDPOINT,HEADERS,TIMEOUT,
// COMPRESSION,CERTIFICATE,CLIENT_CERTIFICATE,CLIENT_KEY}, the traces-specific
// variable winning. A generic endpoint gets /v1/traces appended; a traces
// endpoint is used as it is. Bad values are errors that name the variable.
func FromEnv() (Config, error) {
	c := Config{URL: "http://localhost:4318/v1/traces", Timeout: 10 * time.Second, MaxRetry: 5 * time.Second}
	if v := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		c.URL = v
	} else if v := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); v != "" {
		c.URL = strings.TrimSuffix(v, "/") + "/v1/traces"
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT %q: want an http:// or https:// URL of the collector (usually port 4318)", c.URL)
	}
	headers, name := env("HEADERS")
	if headers != "" {
		if c.Headers, err = parseHeaders(headers); err != nil {
			return c, fmt.Errorf("%s: %w", name, err)
		}
	}
	if v, name := env("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return c, fmt.Errorf("%s %q: want milliseconds, a positive integer", name, v)
		}
		c.Timeout = time.Duration(ms) * time.Millisecond
	}
	switch v, name := env("COMPRESSION"); strings.ToLower(v) {
	case "", "none":
	case "gzip":
		c.Gzip = true
	default:
		return c, fmt.Errorf("%s %q: want gzip or none", name, v)
	}
	c.TLS, err = tlsFromEnv()
	return c, err
}

// env returns OTEL_EXPORTER_OTLP_TRACES_<key>, or else OTEL_EXPORTER_OTLP_<key>,
// with the name of the variable it came from.
func env(key string) (string, string) {
	if v := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_" + key); v != "" {
		return v, "OTEL_EXPORTER_OTLP_TRACES_" + key
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_" + key), "OTEL_EXPORTER_OTLP_" + key
}

// parseHeaders reads the W3C-baggage-like list the specification uses:
// key=value pairs separated by commas, values percent-encoded.
func parseHeaders(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", pair)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", k, err)
		}
		out[k] = dv
	}
	return out, nil
}

func tlsFromEnv() (*tls.Config, error) {
	ca, caVar := env("CERTIFICATE")
	cert, certVar := env("CLIENT_CERTIFICATE")
	key, keyVar := env("CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", caVar, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s: no PEM certificate in it", caVar, ca)
		}
	}
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("%s and %s go together: set both or neither", certVar, keyVar)
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", certVar, keyVar, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// Exporter is an sdktrace.SpanExporter sending OTLP/HTTP protobuf.
type Exporter struct {
	cfg    Config
	client *http.Client

	mu      sync.Mutex
	stopped bool
}

// New makes an exporter; it connects nothing until the first export.
func New(cfg Config) *Exporter {
	client := cfg.Client
	if client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if cfg.TLS != nil {
			tr.TLSClientConfig = cfg.TLS
		}
		client = &http.Client{Transport: tr}
	}
	if cfg.MaxRetry <= 0 {
		cfg.MaxRetry = 5 * time.Second
	}
	return &Exporter{cfg: cfg, client: client}
}

var _ sdktrace.SpanExporter = (*Exporter)(nil)

// ExportSpans sends one batch, retrying what OTLP/HTTP says is worth
// retrying (429, 502, 503, 504, and failures to connect) with growing
// waits or the collector's Retry-After, until the configured timeout.
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	stopped := e.stopped
	e.mu.Unlock()
	if stopped || len(spans) == 0 {
		return nil
	}
	body := encodeTraces(spans)
	if e.cfg.Gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = buf.Bytes()
	}
	if e.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.cfg.Timeout)
		defer cancel()
	}
	wait := 250 * time.Millisecond
	for {
		retry, after, err := e.post(ctx, body)
		if err == nil || !retry {
			return err
		}
		if after <= 0 {
			after = wait
			wait = min(2*wait, e.cfg.MaxRetry)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		case <-time.After(after):
		}
	}
}

// post sends the body once and says whether a failure is worth retrying,
// and after how long the collector asked for.
func (e *Exporter) post(ctx context.Context, body []byte) (retry bool, after time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return false, 0, fmt.Errorf("otlp: %w", err)
	}
	for k, v := range e.cfg.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if e.cfg.Gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return ctx.Err() == nil, 0, fmt.Errorf("otlp: send to %s: %w", e.cfg.URL, err)
	}
	defer resp.Body.Close()
	// The answer is small (a partial-success message at most); read a
	// bounded part so that a wrong endpoint cannot make the server hold
	// a large body.
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode/100 == 2 {
		return false, 0, nil
	}
	err = fmt.Errorf("otlp: %s answered %s", e.cfg.URL, resp.Status)
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
			after = time.Duration(s) * time.Second
		}
		return true, after, err
	}
	if len(msg) > 0 && utf8Printable(msg) {
		err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(msg)))
	}
	return false, 0, err
}

func utf8Printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 && c != '\n' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// Shutdown stops exporting; spans handed over after it are dropped, as the
// SDK expects of an exporter.
func (e *Exporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
	e.client.CloseIdleConnections()
	return ctx.Err()
}
