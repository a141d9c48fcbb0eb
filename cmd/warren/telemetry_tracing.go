package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
	"github.com/warrenhq/warren/cmd/warren/otlp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// setupTracing installs a tracer provider when the standard OpenTelemetry
// environment asks for traces, and returns how to flush and stop it (nil
// when tracing stays off: then no span is recorded and the MCP server
// installs no tracing hooks at all).
//
// OTEL_TRACES_EXPORTER chooses: otlp, console (stderr: stdout may carry
// JSON-RPC) or none; unset, traces are on when an OTLP endpoint is named
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). The
// OTLP exporter reads its other settings (headers, timeout, TLS) from the
// same environment (package otlp). Sampling follows OTEL_TRACES_SAMPLER, parent-based by
// default, so a client's sampled traceparent is honoured.
func setupTracing(log zerolog.Logger) (func(context.Context) error, error) {
	kind := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")))
	if kind == "" && (os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		kind = "otlp"
	}
	var exp sdktrace.SpanExporter
	var err error
	switch kind {
	case "", "none":
		return nil, nil
	case "otlp":
		proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		if proto == "" {
			proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		if proto != "" && proto != "http/protobuf" {
			return nil, cli.Exit(fmt.Sprintf("OTEL_EXPORTER_OTLP_PROTOCOL %q: warren exports traces over http/protobuf only; "+
				"point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's HTTP port (usually 4318) and unset the protocol", proto), 2)
		}
		var cfg otlp.Config
		if cfg, err = otlp.FromEnv(); err != nil {
			return nil, cli.Exit(err.Error(), 2)
		}
		exp = otlp.New(cfg)
	case "console":
		exp, err = stdouttrace.New(stdouttrace.WithWriter(os.Stderr))
	default:
		return nil, cli.Exit(fmt.Sprintf("OTEL_TRACES_EXPORTER %q: want otlp, console or none", kind), 2)
	}
	if err != nil {
		return nil, fmt.Errorf("start the trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName("warren"), semconv.ServiceVersion(buildVersion())))
	if err != nil {
		res = resource.Default()
	}
	// The SDK's batch processor, fed in bunches (telemetry_spans.go).
	sp := newSpanGather(sdktrace.NewBatchSpanProcessor(exp), gatherConfigFromEnv())
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn().Err(err).Msg("tracing") }))
	log.Info().Str("exporter", kind).Msg("tracing on")
	return tp.Shutdown, nil
}
