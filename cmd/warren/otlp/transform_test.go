package otlp

import (
	"bytes"
	"encoding/hex"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestEncodeDecodesAsOTLP: what encodeTraces writes decodes with the
// protocol's generated types into the same spans, every field kept, zero
// values included where the protocol needs them (a false bool, a 0 int).
func TestEncodeDecodesAsOTLP(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	pid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	start := time.Unix(1_700_000_000, 5)
	res := resource.NewSchemaless(attribute.String("service.name", "warren"))
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: pid, TraceFlags: 1, Remote: true})
	stubs := tracetest.SpanStubs{
		{
			Name:        "tools/call shell_exec",
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: 1}),
			Parent:      parent,
			SpanKind:    trace.SpanKindServer,
			StartTime:   start,
			EndTime:     start.Add(time.Millisecond),
			Attributes: []attribute.KeyValue{attribute.Bool("ok", false), attribute.Int64("n", 0),
				attribute.Float64("f", 1.5), attribute.StringSlice("ss", []string{"a", ""}), attribute.IntSlice("is", []int{3})},
			Events:               []sdktrace.Event{{Name: "retry", Time: start, Attributes: []attribute.KeyValue{attribute.Int("attempt", 2)}}},
			Links:                []sdktrace.Link{{SpanContext: parent}},
			Status:               sdktrace.Status{Code: codes.Error, Description: "exit 2"},
			DroppedEvents:        3,
			Resource:             res,
			InstrumentationScope: instrumentation.Scope{Name: "warren/mcp", Version: "1"},
		},
		{Name: "second", SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: pid}),
			Resource: res, InstrumentationScope: instrumentation.Scope{Name: "warren/mcp", Version: "1"}},
	}
	var td tracepb.TracesData
	if err := proto.Unmarshal(encodeTraces(stubs.Snapshots()), &td); err != nil {
		t.Fatal(err)
	}
	if len(td.ResourceSpans) != 1 || len(td.ResourceSpans[0].ScopeSpans) != 1 || len(td.ResourceSpans[0].ScopeSpans[0].Spans) != 2 {
		t.Fatalf("want 1 resource, 1 scope, 2 spans: %v", &td)
	}
	rs := td.ResourceSpans[0]
	if a := rs.Resource.Attributes; len(a) != 1 || a[0].Key != "service.name" || a[0].Value.GetStringValue() != "warren" {
		t.Errorf("resource %v", rs.Resource)
	}
	if sc := rs.ScopeSpans[0].Scope; sc.Name != "warren/mcp" || sc.Version != "1" {
		t.Errorf("scope %v", sc)
	}
	s := rs.ScopeSpans[0].Spans[0]
	if hex.EncodeToString(s.TraceId) != tid.String() || !bytes.Equal(s.SpanId, sid[:]) || !bytes.Equal(s.ParentSpanId, pid[:]) {
		t.Errorf("ids %x %x %x", s.TraceId, s.SpanId, s.ParentSpanId)
	}
	if s.Name != "tools/call shell_exec" || s.Kind != tracepb.Span_SPAN_KIND_SERVER ||
		s.StartTimeUnixNano != uint64(start.UnixNano()) || s.EndTimeUnixNano != uint64(start.Add(time.Millisecond).UnixNano()) {
		t.Errorf("span %v", s)
	}
	if s.Flags != 0x301 || s.DroppedEventsCount != 3 {
		t.Errorf("flags %#x dropped events %d: want 0x301 (sampled, remote parent) and 3", s.Flags, s.DroppedEventsCount)
	}
	if s.Status.Code != tracepb.Status_STATUS_CODE_ERROR || s.Status.Message != "exit 2" {
		t.Errorf("status %v", s.Status)
	}
	attrs := map[string]string{}
	for _, kv := range s.Attributes {
		attrs[kv.Key] = kv.Value.String()
	}
	if len(attrs) != 5 || s.Attributes[0].Value.GetValue() == nil || s.Attributes[1].Value.GetValue() == nil ||
		s.Attributes[2].Value.GetDoubleValue() != 1.5 || len(s.Attributes[3].Value.GetArrayValue().GetValues()) != 2 ||
		s.Attributes[4].Value.GetArrayValue().GetValues()[0].GetIntValue() != 3 {
		t.Errorf("attributes %v", attrs)
	}
	if len(s.Events) != 1 || s.Events[0].Name != "retry" || s.Events[0].Attributes[0].Value.GetIntValue() != 2 {
		t.Errorf("events %v", s.Events)
	}
	if len(s.Links) != 1 || !bytes.Equal(s.Links[0].SpanId, pid[:]) || s.Links[0].Flags != 0x301 {
		t.Errorf("links %v", s.Links)
	}
	if s2 := rs.ScopeSpans[0].Spans[1]; s2.Name != "second" || s2.ParentSpanId != nil || s2.Flags != 0x100 {
		t.Errorf("second span %v", s2)
	}
}

// Messages whose length takes two and three bytes (a 200-byte and a
// 40,000-byte attribute) decode as written, among many spans.
func TestEncodeLongMessagesDecode(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	res := resource.NewSchemaless(attribute.String("service.name", "warren"))
	var stubs tracetest.SpanStubs
	for i, n := range []int{0, 200, 40_000, 5, 127, 128, 16_383, 16_384} {
		sid := trace.SpanID{byte(i + 1)}
		stubs = append(stubs, tracetest.SpanStub{Name: "s", SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}),
			Attributes: []attribute.KeyValue{attribute.String("v", string(bytes.Repeat([]byte{'x'}, n)))},
			Resource:   res, InstrumentationScope: instrumentation.Scope{Name: "warren/mcp"}})
	}
	var td tracepb.TracesData
	if err := proto.Unmarshal(encodeTraces(stubs.Snapshots()), &td); err != nil {
		t.Fatal(err)
	}
	spans := td.ResourceSpans[0].ScopeSpans[0].Spans
	if len(spans) != len(stubs) {
		t.Fatalf("%d spans, want %d", len(spans), len(stubs))
	}
	for i, s := range spans {
		if got, want := len(s.Attributes[0].Value.GetStringValue()), len(stubs[i].Attributes[0].Value.AsString()); got != want {
			t.Errorf("span %d: an attribute of %d bytes, want %d", i, got, want)
		}
	}
}
