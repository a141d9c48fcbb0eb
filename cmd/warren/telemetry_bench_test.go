package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/warrenhq/warren/mcp"
)

// BenchmarkTracedCall measures what tracing adds to the synchronous path
// of one tool call, without a jail or a client to drown it: a tool that
// opens the spans shell_exec's domain code opens (session lookup, the
// command with its attributes, the state save), called through the MCP
// server's JSON-RPC handling and middleware, with tracing off and with
// tracing set up as 'warren serve' sets it up (OTLP over HTTP to a local
// stand-in collector). The difference of the two ns/op is the cost on
// the call's path; exporting runs beside it, on the other core.
func BenchmarkTracedCall(b *testing.B) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	defer otel.SetTracerProvider(noop.NewTracerProvider())
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name, func(b *testing.B) {
			otel.SetTracerProvider(noop.NewTracerProvider())
			if on {
				b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
				stop, err := setupTracing(zerolog.Nop())
				if err != nil {
					b.Fatal(err)
				}
				defer stop(context.Background())
			}
			srv, err := mcp.New(mcp.Options{Log: zerolog.Nop(), Tracing: on, Toolsets: []string{"shell"}})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			srv.MCPServer().AddTool(mcpgo.NewTool("traced"), tracedTool)
			ctx := mcp.WithUser(context.Background(), "alice")
			msgs := make([][]byte, 64)
			for i := range msgs {
				msgs[i] = []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"name":"traced","arguments":{}}}`)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				resp := srv.MCPServer().HandleMessage(ctx, json.RawMessage(msgs[i%len(msgs)]))
				if _, ok := resp.(mcpgo.JSONRPCResponse); !ok {
					b.Fatalf("traced tool: %#v", resp)
				}
			}
		})
	}
}

// tracedTool opens the spans of shell_exec's domain code, as the packages
// do it: through the global tracer provider.
func tracedTool(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	tr := otel.Tracer("bench")
	_, open := tr.Start(ctx, "sessions.open")
	open.End()
	// jobs.start: the command runs under the request's span, not its ctx.
	jctx := trace.ContextWithSpan(context.Background(), trace.SpanFromContext(ctx))
	_, exec := tr.Start(jctx, "sandbox.exec")
	if exec.IsRecording() {
		exec.SetAttributes(attribute.Int("exit_code", 0), attribute.String("end", "completed"), attribute.Bool("shell_restarted", false))
	}
	exec.End()
	return mcpgo.NewToolResultText("hi\n"), nil
}
