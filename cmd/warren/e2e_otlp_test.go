package main

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestTracesReachAnOTLPCollector: a server started with the standard
// OTEL_EXPORTER_OTLP_* environment sends the spans of a tool call to the
// collector as OTLP/HTTP protobuf: gzip when asked, with the configured
// headers, retried after the collector's 503, the client's trace id and
// parent kept, the resource naming warren.
func TestTracesReachAnOTLPCollector(t *testing.T) {
	needJail(t)
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	var mu sync.Mutex
	var got []*tracepb.ResourceSpans
	var headers []http.Header
	refused := false
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/v1/traces" {
			t.Errorf("export to %s, want /v1/traces", r.URL.Path)
		}
		headers = append(headers, r.Header.Clone())
		if !refused { // the first export is refused: the exporter must retry it
			refused = true
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Errorf("gzip body: %v", err)
				return
			}
			body = zr
		}
		raw, _ := io.ReadAll(body)
		var td tracepb.TracesData // the wire form of ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &td); err != nil {
			t.Errorf("decode export: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		got = append(got, td.ResourceSpans...)
	}))
	defer collector.Close()

	cmd := exec.Command(warrenBin, "serve", "stdio", "--data-dir", jailDir(t))
	cmd.Env = append(cmd.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL,
		"OTEL_EXPORTER_OTLP_HEADERS=x-tenant=acme%20co,authorization=Key%20k1",
		"OTEL_EXPORTER_OTLP_COMPRESSION=gzip", "OTEL_BSP_SCHEDULE_DELAY=100")
	c := connect(t, &sdk.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &sdk.CallToolParams{
		Name: "shell_exec", Arguments: map[string]any{"command": "echo traced"},
		Meta: sdk.Meta{"traceparent": "00-" + traceID + "-" + parentID + "-01"},
	})
	if err != nil || res.IsError {
		t.Fatalf("shell_exec: %v %s", err, textOf(res))
	}
	c.cs.Close() // the server flushes its spans as it stops
	_ = cmd.Wait()

	mu.Lock()
	defer mu.Unlock()
	if !refused || len(got) == 0 {
		t.Fatalf("the collector received no spans after refusing the first export (%d requests)", len(headers))
	}
	for _, h := range headers {
		if h.Get("Content-Type") != "application/x-protobuf" || h.Get("Content-Encoding") != "gzip" ||
			h.Get("X-Tenant") != "acme co" || h.Get("Authorization") != "Key k1" {
			t.Errorf("export headers %v: want protobuf, gzip, x-tenant 'acme co' and authorization 'Key k1'", h)
		}
	}
	var service string
	var child *tracepb.Span
	for _, rs := range got {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				if hex.EncodeToString(s.TraceId) == traceID && hex.EncodeToString(s.ParentSpanId) == parentID {
					child = s
				}
			}
		}
	}
	if service != "warren" {
		t.Errorf("resource service.name %q, want warren", service)
	}
	if child == nil {
		t.Fatalf("no span continues the client's trace %s from %s", traceID, parentID)
	}
	const remote = uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	if child.Flags&remote != remote || child.Flags&1 != 1 || child.Name == "" || child.EndTimeUnixNano < child.StartTimeUnixNano {
		t.Errorf("span %q flags %#x start %d end %d: want sampled, a remote parent, and an end after its start",
			child.Name, child.Flags, child.StartTimeUnixNano, child.EndTimeUnixNano)
	}
}
