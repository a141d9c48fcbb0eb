package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/warrenhq/warren/sessions"
)

// TestShellExecSpans runs one shell_exec in a real jail with tracing on
// and an in-memory exporter: the request's span is the child of the
// traceparent the client sent in _meta, and the session lookup, the
// command and the jail start hang below it.
func TestShellExecSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	db := openTestDB(t)
	store, err := sessions.NewStore(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	if err := os.Chmod(filepath.Dir(data), 0o755); err != nil { // the jail's uid must reach its workspace
		t.Fatal(err)
	}
	mgr, err := sessions.NewManager(store, sessions.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Close(context.Background()) })
	srv, err := New(Options{Sessions: mgr, Log: zerolog.Nop(), Tracing: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)

	const parentTrace, parentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell_exec","arguments":{"command":"echo hi"},` +
		`"_meta":{"traceparent":"00-` + parentTrace + `-` + parentSpan + `-01"}}}`
	resp := srv.MCPServer().HandleMessage(WithUser(context.Background(), "alice"), json.RawMessage(msg))
	out, _ := json.Marshal(resp)
	if !strings.Contains(string(out), `hi\n`) {
		t.Fatalf("shell_exec echo hi: %s", out)
	}
	_ = tp.ForceFlush(context.Background())

	byName := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		if _, dup := byName[s.Name]; !dup {
			byName[s.Name] = s
		}
	}
	get := func(name string) tracetest.SpanStub {
		t.Helper()
		s, ok := byName[name]
		if !ok {
			t.Fatalf("no span %q among %v", name, names(byName))
		}
		return s
	}
	req := get("mcp.tools/call")
	if got := req.SpanContext.TraceID().String(); got != parentTrace {
		t.Errorf("request span trace %s, want the client's %s", got, parentTrace)
	}
	if got := req.Parent.SpanID().String(); got != parentSpan || !req.Parent.IsRemote() {
		t.Errorf("request span parent %s (remote %v), want the client's span %s", got, req.Parent.IsRemote(), parentSpan)
	}
	var tool string
	for _, a := range req.Attributes {
		if a.Key == "mcp.tool.name" {
			tool = a.Value.AsString()
		}
	}
	if tool != "shell_exec" {
		t.Errorf("request span's mcp.tool.name %q, want shell_exec", tool)
	}
	wantParent := func(child, parent tracetest.SpanStub) {
		t.Helper()
		if child.Parent.SpanID() != parent.SpanContext.SpanID() || child.SpanContext.TraceID() != req.SpanContext.TraceID() {
			t.Errorf("span %s: parent %s in trace %s, want %s (%s) in trace %s", child.Name, child.Parent.SpanID(),
				child.SpanContext.TraceID(), parent.Name, parent.SpanContext.SpanID(), req.SpanContext.TraceID())
		}
	}
	// The request's span is the tool call's: no second span covers the
	// same time (tracing.go, toolSpan).
	wantParent(get("sessions.open"), req)
	exec := get("sandbox.exec")
	wantParent(exec, req)
	wantParent(get("sandbox.jail_start"), exec)
	if _, ok := byName["tool.shell_exec"]; ok {
		t.Errorf("a tool.shell_exec span besides the request's: %v", names(byName))
	}

	// A tool's error result marks the request's span.
	exp.Reset()
	msg = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shell_exec","arguments":{"command":"true","session_id":"s-0000000000000000"}}}`
	resp = srv.MCPServer().HandleMessage(WithUser(context.Background(), "alice"), json.RawMessage(msg))
	if out, _ := json.Marshal(resp); !strings.Contains(string(out), `"isError":true`) {
		t.Fatalf("shell_exec in a session that does not exist: %s", out)
	}
	_ = tp.ForceFlush(context.Background())
	var found bool
	for _, s := range exp.GetSpans() {
		if s.Name == "mcp.tools/call" {
			found = true
			if s.Status.Code != codes.Error {
				t.Errorf("request span of a tool error: status %v, want Error", s.Status)
			}
		}
	}
	if !found {
		t.Errorf("no request span for the failed call among %d spans", len(exp.GetSpans()))
	}
}

// names lists the span names of byName.
func names(byName map[string]tracetest.SpanStub) []string {
	var out []string
	for n := range byName {
		out = append(out, n)
	}
	return out
}

// A request without trace headers (every stdio request: mcp-go hands the
// span an empty header map) costs the request span no work looking for
// them: W3C extraction canonicalizes the header names it looks up, an
// allocation and a parse on every call for nothing. A traceparent header
// that is there is still read.
func TestEmptyHeadersAreNotSearchedForATraceContext(t *testing.T) {
	ctx, empty := context.Background(), http.Header{}
	allocs := testing.AllocsPerRun(100, func() {
		_ = headerPropagator{}.Extract(ctx, empty)
	})
	if allocs != 0 {
		t.Fatalf("extracting from empty headers allocates %.0f times per request", allocs)
	}
	h := http.Header{}
	w3cParent := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	h.Set("traceparent", w3cParent)
	if sc := trace.SpanContextFromContext(headerPropagator{}.Extract(ctx, h)); sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("a traceparent header was not read: %v", sc)
	}
}
