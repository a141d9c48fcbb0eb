package mcp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

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
			var names []string
			for n := range byName {
				names = append(names, n)
			}
			t.Fatalf("no span %q among %v", name, names)
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
	tool := get("tool.shell_exec")
	wantParent := func(child, parent tracetest.SpanStub) {
		t.Helper()
		if child.Parent.SpanID() != parent.SpanContext.SpanID() || child.SpanContext.TraceID() != req.SpanContext.TraceID() {
			t.Errorf("span %s: parent %s in trace %s, want %s (%s) in trace %s", child.Name, child.Parent.SpanID(),
				child.SpanContext.TraceID(), parent.Name, parent.SpanContext.SpanID(), req.SpanContext.TraceID())
		}
	}
	wantParent(tool, req)
	wantParent(get("sessions.open"), tool)
	exec := get("sandbox.exec")
	wantParent(exec, tool)
	wantParent(get("sandbox.jail_start"), exec)
}
