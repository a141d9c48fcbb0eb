package otlp

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP trace messages are written field by field with protowire rather
// than through the generated types of go.opentelemetry.io/proto/otlp: those
// register their descriptors at start in every server, traced or not (about
// 1.5 MB of idle RSS measured), for a message this small. Field numbers are
// those of opentelemetry/proto/trace/v1/trace.proto and common/v1/common.proto;
// the test decodes the result with the generated types.

// Span kinds, status codes and flag bits as the protocol numbers them.
const (
	flagHasIsRemote = 0x100 // SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
	flagIsRemote    = 0x200 // SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
	statusOK        = 1
	statusError     = 2
)

// encodeTraces writes the export request: spans grouped by resource, then by
// instrumentation scope, in the order they first appear. TracesData and
// ExportTraceServiceRequest have the same wire form (field 1, the repeated
// ResourceSpans).
func encodeTraces(spans []sdktrace.ReadOnlySpan) []byte {
	type group struct {
		res    *resource.Resource
		scopes []instrumentation.Scope
		spans  map[instrumentation.Scope][]sdktrace.ReadOnlySpan
	}
	var groups []*group
	byRes := map[*resource.Resource]*group{}
	for _, s := range spans {
		g := byRes[s.Resource()]
		if g == nil {
			g = &group{res: s.Resource(), spans: map[instrumentation.Scope][]sdktrace.ReadOnlySpan{}}
			byRes[s.Resource()] = g
			groups = append(groups, g)
		}
		sc := s.InstrumentationScope()
		if _, ok := g.spans[sc]; !ok {
			g.scopes = append(g.scopes, sc)
		}
		g.spans[sc] = append(g.spans[sc], s)
	}
	b := make([]byte, 0, 256*len(spans))
	for _, g := range groups {
		b = message(b, 1, func(b []byte) []byte { // ResourceSpans
			b = message(b, 1, func(b []byte) []byte { // Resource
				if g.res != nil {
					b = keyValues(b, 1, g.res.Attributes())
				}
				return b
			})
			for _, sc := range g.scopes {
				b = message(b, 2, func(b []byte) []byte { // ScopeSpans
					b = message(b, 1, func(b []byte) []byte { // InstrumentationScope
						b = str(b, 1, sc.Name)
						b = str(b, 2, sc.Version)
						return keyValues(b, 3, sc.Attributes.ToSlice())
					})
					for _, s := range g.spans[sc] {
						b = message(b, 2, func(b []byte) []byte { return span(b, s) })
					}
					return str(b, 3, sc.SchemaURL)
				})
			}
			if g.res != nil {
				b = str(b, 3, g.res.SchemaURL())
			}
			return b
		})
	}
	return b
}

func span(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc, parent := s.SpanContext(), s.Parent()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = bytesField(b, 1, tid[:])
	b = bytesField(b, 2, sid[:])
	b = str(b, 3, sc.TraceState().String())
	if parent.SpanID().IsValid() {
		p := parent.SpanID()
		b = bytesField(b, 4, p[:])
	}
	b = str(b, 5, s.Name())
	b = varint(b, 6, uint64(kindOf(s.SpanKind())))
	b = fixed64(b, 7, unixNano(s.StartTime().UnixNano()))
	b = fixed64(b, 8, unixNano(s.EndTime().UnixNano()))
	b = keyValues(b, 9, s.Attributes())
	b = varint(b, 10, count(s.DroppedAttributes()))
	for _, e := range s.Events() {
		b = message(b, 11, func(b []byte) []byte {
			b = fixed64(b, 1, unixNano(e.Time.UnixNano()))
			b = str(b, 2, e.Name)
			b = keyValues(b, 3, e.Attributes)
			return varint(b, 4, count(e.DroppedAttributeCount))
		})
	}
	b = varint(b, 12, count(s.DroppedEvents()))
	for _, l := range s.Links() {
		b = message(b, 13, func(b []byte) []byte {
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = bytesField(b, 1, ltid[:])
			b = bytesField(b, 2, lsid[:])
			b = str(b, 3, l.SpanContext.TraceState().String())
			b = keyValues(b, 4, l.Attributes)
			b = varint(b, 5, count(l.DroppedAttributeCount))
			return fixed32(b, 6, flagsOf(l.SpanContext.TraceFlags(), l.SpanContext))
		})
	}
	b = varint(b, 14, count(s.DroppedLinks()))
	b = message(b, 15, func(b []byte) []byte { // Status
		switch st := s.Status(); st.Code {
		case codes.Ok:
			b = varint(b, 3, statusOK)
		case codes.Error:
			b = str(b, 2, st.Description) // the SDK keeps a description only with Error
			b = varint(b, 3, statusError)
		}
		return b
	})
	return fixed32(b, 16, flagsOf(sc.TraceFlags(), parent))
}

// flagsOf is the W3C trace flags in the low byte, and whether the parent
// (or the linked span) came from another process: OTLP's two "is remote"
// bits, the first saying the second is known.
func flagsOf(tf trace.TraceFlags, other trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if other.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

// kindOf numbers a span kind as OTLP does (the SDK's numbering is the same
// but for "unspecified", which OTLP keeps as 0 too).
func kindOf(k trace.SpanKind) int {
	switch k {
	case trace.SpanKindInternal, trace.SpanKindServer, trace.SpanKindClient, trace.SpanKindProducer, trace.SpanKindConsumer:
		return int(k)
	}
	return 0
}

func keyValues(b []byte, num protowire.Number, kvs []attribute.KeyValue) []byte {
	for _, kv := range kvs {
		b = message(b, num, func(b []byte) []byte {
			b = str(b, 1, string(kv.Key))
			return message(b, 2, func(b []byte) []byte { return anyValue(b, kv.Value) })
		})
	}
	return b
}

// anyValue writes the one field of AnyValue's oneof that holds v: always,
// even a zero, since its presence is what says which type the value has.
func anyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		x := uint64(0)
		if v.AsBool() {
			x = 1
		}
		return protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), x)
	case attribute.INT64:
		return protowire.AppendVarint(protowire.AppendTag(b, 3, protowire.VarintType), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return protowire.AppendFixed64(protowire.AppendTag(b, 4, protowire.Fixed64Type), math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		return protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), v.AsString())
	case attribute.BOOLSLICE:
		return array(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return array(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return array(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return array(b, v.AsStringSlice(), attribute.StringValue)
	}
	// A type this exporter does not know is sent as its text, not dropped.
	return protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), v.Emit())
}

func array[T any](b []byte, xs []T, value func(T) attribute.Value) []byte {
	return message(b, 5, func(b []byte) []byte { // ArrayValue
		for _, x := range xs {
			b = message(b, 1, func(b []byte) []byte { return anyValue(b, value(x)) })
		}
		return b
	})
}

// message appends field num holding the message body writes; the body is
// built in its own buffer because its length comes first on the wire.
// message appends a field of message type: body is encoded in place,
// after the tag, and then moved up by the size of its length, which goes
// in front of it. Encoding each message into a buffer of its own, as
// before, made garbage of the whole batch at every level of nesting: an
// export of a second's spans allocated a few KB per call traced.
func message(b []byte, num protowire.Number, body func([]byte) []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	start := len(b)
	b = body(b)
	n := len(b) - start
	k := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, k)...)
	copy(b[start+k:], b[start:start+n])
	protowire.AppendVarint(b[start:start], uint64(n))
	return b
}

func str(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

func bytesField(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func varint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func fixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed64(protowire.AppendTag(b, num, protowire.Fixed64Type), v)
}

func fixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendFixed32(protowire.AppendTag(b, num, protowire.Fixed32Type), v)
}

func unixNano(n int64) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

func count(n int) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(min(n, math.MaxUint32))
}
