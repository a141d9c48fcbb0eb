package mcp

import (
	"context"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/tracing"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracingOptions connect mcp-go's tracing hooks to OpenTelemetry: a server
// span per JSON-RPC request (mcp.<method>; a tool call's is also its
// handler's, see toolSpan), and the W3C trace context a client sends in the
// request's _meta (traceparent, tracestate) or, over HTTP, in its headers
// as the parent. Spans go to the global tracer provider, which cmd/warren
// sets up from the OTEL_* environment.
func tracingOptions() []server.ServerOption {
	t := otelTracer{t: otel.Tracer("github.com/warrenhq/warren/mcp")}
	return []server.ServerOption{
		server.WithTracer(t),
		server.WithPropagator(headerPropagator{}),
		server.WithMetaPropagator(metaPropagator{}),
	}
}

// w3c reads and writes the traceparent and tracestate fields.
var w3c = propagation.TraceContext{}

// otelTracer adapts an OpenTelemetry tracer to mcp-go's tracing.Tracer.
type otelTracer struct{ t trace.Tracer }

func (o otelTracer) Start(ctx context.Context, name string, kind tracing.SpanKind, attrs ...tracing.Attribute) (context.Context, tracing.Span) {
	if kind == tracing.SpanKindInternal && strings.HasPrefix(name, "tool.") {
		if p, ok := tracing.SpanFromContext(ctx).(*otelSpan); ok {
			return ctx, toolSpan{p}
		}
	}
	kv := make([]attribute.KeyValue, len(attrs))
	for i, a := range attrs {
		kv[i] = attribute.String(a.Key, a.Value)
	}
	ctx, sp := o.t.Start(ctx, name, trace.WithSpanKind(spanKind(kind)), trace.WithAttributes(kv...))
	s := &otelSpan{sp} // a pointer: an interface holds it without copying
	// mcp-go looks for the request's span under its own key.
	return tracing.ContextWithSpan(ctx, s), s
}

func spanKind(k tracing.SpanKind) trace.SpanKind {
	switch k {
	case tracing.SpanKindServer:
		return trace.SpanKindServer
	case tracing.SpanKindClient:
		return trace.SpanKindClient
	case tracing.SpanKindInternal:
		return trace.SpanKindInternal
	}
	return trace.SpanKindUnspecified
}

// otelSpan adapts an OpenTelemetry span to mcp-go's tracing.Span.
type otelSpan struct{ s trace.Span }

func (o *otelSpan) SetAttributes(attrs ...tracing.Attribute) {
	for _, a := range attrs {
		o.s.SetAttributes(attribute.String(a.Key, a.Value))
	}
}

func (o *otelSpan) RecordError(err error) { o.s.RecordError(err) }

func (o *otelSpan) SetStatus(code tracing.StatusCode, description string) {
	switch code {
	case tracing.StatusError:
		o.s.SetStatus(codes.Error, description)
	case tracing.StatusOK:
		o.s.SetStatus(codes.Ok, description)
	}
}

func (o *otelSpan) End() { o.s.End() }

// toolSpan stands in for the span mcp-go opens around a tool's handler
// (tool.<name>), which would cover the same time as the request's span
// (mcp.tools/call, which already names the tool in mcp.tool.name) and
// cost a fifth of the spans of a shell_exec. What mcp-go records on it, a
// handler's error and status, goes to the request's span; End is the
// request's to call.
type toolSpan struct{ req *otelSpan }

func (toolSpan) SetAttributes(...tracing.Attribute) {} // mcp.tool.name, on the request's span already

func (t toolSpan) RecordError(err error) { t.req.RecordError(err) }

func (t toolSpan) SetStatus(code tracing.StatusCode, description string) {
	t.req.SetStatus(code, description)
}

func (toolSpan) End() {}

// headerPropagator reads the trace context of HTTP requests' headers.
type headerPropagator struct{}

func (headerPropagator) Inject(ctx context.Context, h http.Header) {
	w3c.Inject(ctx, propagation.HeaderCarrier(h))
}

func (headerPropagator) Extract(ctx context.Context, h http.Header) context.Context {
	if len(h) == 0 || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx // _meta, read first, named the parent: it is the more specific
	}
	return w3c.Extract(ctx, propagation.HeaderCarrier(h))
}

// metaPropagator reads and writes the trace context in a request's _meta,
// which every transport carries (stdio has no headers). mcp-go reads _meta
// before the headers; headerPropagator keeps what _meta named.
type metaPropagator struct{}

func (metaPropagator) InjectMeta(ctx context.Context, meta *mcp.Meta) *mcp.Meta {
	if meta == nil {
		meta = &mcp.Meta{}
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	for k, v := range c {
		if meta.AdditionalFields == nil {
			meta.AdditionalFields = map[string]any{}
		}
		meta.AdditionalFields[k] = v
	}
	return meta
}

func (metaPropagator) ExtractMeta(ctx context.Context, meta *mcp.Meta) context.Context {
	if meta == nil || meta.AdditionalFields == nil {
		return ctx
	}
	c := propagation.MapCarrier{}
	for _, k := range w3c.Fields() {
		if v, ok := meta.AdditionalFields[k].(string); ok {
			c[k] = v
		}
	}
	if len(c) == 0 {
		return ctx
	}
	return w3c.Extract(ctx, c)
}
