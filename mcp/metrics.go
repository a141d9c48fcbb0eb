package mcp

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/warrenhq/warren/sessions/bound"
)

// The package's metrics. Labels are bounded: tool names come from the
// registry (an unknown tool never reaches a handler), outcomes and status
// codes are small fixed sets; no session, user or path is a label.
var (
	toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warren_mcp_tool_calls_total",
		Help: "MCP tool calls, by tool and outcome: ok, tool_error (a result with isError) or protocol_error (a JSON-RPC error).",
	}, []string{"tool", "outcome"})
	toolSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "warren_mcp_tool_call_duration_seconds",
		Help:    "Time from a tool call reaching its handler to its result, by tool.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"tool"})
	toolOutputBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warren_mcp_tool_output_bytes_total",
		Help: "Bytes of text content in tool results, by tool.",
	}, []string{"tool"})
	httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warren_http_requests_total",
		Help: "HTTP requests answered, by status code.",
	}, []string{"code"})
)

// Tool call outcomes, the values of the outcome label.
const (
	outcomeOK            = "ok"
	outcomeToolError     = "tool_error"
	outcomeProtocolError = "protocol_error"
)

// RegisterMetrics registers the package's metrics with r.
func RegisterMetrics(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{toolCalls, toolSeconds, toolOutputBytes, httpRequests} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// InstrumentHTTP counts h's responses by status code.
func InstrumentHTTP(h http.Handler) http.Handler {
	return promhttp.InstrumentHandlerCounter(httpRequests, h)
}

// observe installs the server's instrumentation: traces when asked (they
// must be installed before any other tool middleware, to be outermost),
// then the metrics and request logs of every tool call.
func observe(d *deps, s *server.MCPServer, opts Options) {
	if opts.Tracing {
		for _, o := range tracingOptions() {
			o(s)
		}
	}
	s.Use(d.observeTools)
}

// observeTools is tool middleware: it counts and times every call, counts
// the bytes of its result, and gives the call a logger that names the
// user, the session and the trace.
func (d *deps) observeTools(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tool := req.Params.Name
		// The session_id argument as the client wrote it: it is logged.
		session, _ := req.GetArguments()["session_id"].(string)
		session = bound.String(session, bound.Name)
		rl := &requestLog{base: d.log, ctx: ctx, session: session}
		ctx = context.WithValue(ctx, requestLogKey{}, rl)
		start := time.Now()
		res, err := next(ctx, req)
		elapsed := time.Since(start)

		outcome, size := outcomeOK, 0
		switch {
		case err != nil:
			outcome = outcomeProtocolError
		case res != nil && res.IsError:
			outcome = outcomeToolError
		}
		if res != nil {
			for _, c := range res.Content {
				if t, ok := c.(mcp.TextContent); ok {
					size += len(t.Text)
				}
			}
			if s, ok := res.StructuredContent.(inSession); ok && session == "" {
				session = s.inSession()
			}
		}
		toolCalls.WithLabelValues(tool, outcome).Inc()
		toolSeconds.WithLabelValues(tool).Observe(elapsed.Seconds())
		toolOutputBytes.WithLabelValues(tool).Add(float64(size))
		if d.log.GetLevel() <= zerolog.DebugLevel && zerolog.GlobalLevel() <= zerolog.DebugLevel {
			e := rl.logger().Debug()
			// Never the arguments or the output: they may hold secrets.
			e.Str("tool", tool).Str("session", session).Str("outcome", outcome).
				Dur("duration", elapsed).Int("output_bytes", size).Err(err).Msg("tool call")
		}
		return res, err
	}
}

// requestLogger is log with the fields every line of a request carries:
// the user, the session (when the request names one) and the trace.
func requestLogger(ctx context.Context, log zerolog.Logger, session string) zerolog.Logger {
	c := log.With().Str("user", UserFrom(ctx))
	if session != "" {
		c = c.Str("session", session)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		c = c.Str("trace_id", sc.TraceID().String()).Str("span_id", sc.SpanID().String())
	}
	return c.Logger()
}

// requestLog makes the logger of one request (requestLogger) the first
// time a line is logged: most calls log nothing, and building it costs
// allocations on every call.
type requestLog struct {
	base    zerolog.Logger
	ctx     context.Context
	session string
	once    sync.Once
	l       zerolog.Logger
}

type requestLogKey struct{}

func (r *requestLog) logger() *zerolog.Logger {
	r.once.Do(func() { r.l = requestLogger(r.ctx, r.base, r.session) })
	return &r.l
}

// logFor returns the logger of ctx's request (observeTools), or the
// server's outside a request.
func (d *deps) logFor(ctx context.Context) *zerolog.Logger {
	if r, ok := ctx.Value(requestLogKey{}).(*requestLog); ok {
		return r.logger()
	}
	return &d.log
}
