package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/mcp"
	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/tasks"
)

// metricsAddrFlag serves /metrics on an address of its own.
func metricsAddrFlag() cli.Flag {
	return &cli.StringFlag{Name: "metrics-addr",
		Usage: "also serve Prometheus metrics (and /healthz, /readyz) at http://ADDR/metrics, without authentication; " +
			"a bare :PORT listens on 127.0.0.1"}
}

// dataDirCollectors are the figures read from the data directory itself:
// the same for the server's /metrics and for 'warren status'.
func dataDirCollectors(db *sql.DB, dir string) []prometheus.Collector {
	return []prometheus.Collector{
		sessions.StateCollector(db),
		sessions.LeaseStateCollector(db),
		tasks.LeaseCollector(db),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "warren_data_dir_free_bytes",
			Help: "Bytes free to warren on the file system of the data directory.",
		}, func() float64 { free, _, _ := diskSpace(dir); return float64(free) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "warren_data_dir_size_bytes",
			Help: "Size of the file system of the data directory.",
		}, func() float64 { _, size, _ := diskSpace(dir); return float64(size) }),
	}
}

// newRegistry builds the server's registry: every package's metrics, the
// data directory's figures, the database pool and the process.
func newRegistry(svc *services) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	for _, register := range []func(prometheus.Registerer) error{
		sandbox.RegisterMetrics, mcp.RegisterMetrics, tasks.RegisterMetrics, metering.RegisterMetrics,
	} {
		if err := register(reg); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	cs := append(dataDirCollectors(svc.db, svc.dataDir),
		svc.sessions.QuotaCollector(),
		svc.sessions.LeaseCollector(),
		collectors.NewDBStatsCollector(svc.db, "warren"),
		busyRetries,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return reg, nil
}

// telemetry is what a serve command runs besides MCP: the metrics
// registry, the metrics listener and the tracer provider.
type telemetry struct {
	reg      *prometheus.Registry
	metrics  http.Handler
	ready    http.Handler
	listener *http.Server
	// stopTracing flushes and stops the tracer provider; nil when off.
	stopTracing func(context.Context) error
}

// startTelemetry sets up tracing from the environment. It runs before the
// MCP server is built, which needs to know whether to trace.
func startTelemetry(log zerolog.Logger) (*telemetry, error) {
	stop, err := setupTracing(log)
	if err != nil {
		return nil, err
	}
	return &telemetry{stopTracing: stop}, nil
}

// serveMetrics builds the registry and the handlers, and starts the
// --metrics-addr listener when asked.
func (t *telemetry) serveMetrics(c *cli.Context, svc *services) error {
	reg, err := newRegistry(svc)
	if err != nil {
		return err
	}
	t.reg = reg
	t.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: promLog{svc.log}})
	t.ready = readyHandler(svc.db, svc.dataDir)
	addr := c.String("metrics-addr")
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return cli.Exit(fmt.Sprintf("--metrics-addr %q: want host:port or :port, e.g. 127.0.0.1:9464", addr), 2)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !mcp.IsLoopbackHost(host) {
		svc.log.Warn().Str("addr", addr).Msg("metrics are served without authentication on a non-loopback address")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return fmt.Errorf("listen for metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", t.metrics)
	mux.Handle("/readyz", t.ready)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	t.listener = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	svc.log.Info().Str("url", "http://"+ln.Addr().String()+"/metrics").Msg("serving metrics")
	go func() {
		if err := t.listener.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			svc.log.Error().Err(err).Msg("metrics listener")
		}
	}()
	return nil
}

// close stops the listener and flushes the spans not yet exported.
func (t *telemetry) close(log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if t.listener != nil {
		_ = t.listener.Shutdown(ctx)
	}
	if t.stopTracing != nil {
		if err := t.stopTracing(ctx); err != nil {
			log.Warn().Err(err).Msg("flush traces")
		}
	}
}

// promLog passes promhttp's errors to the server's log.
type promLog struct{ l zerolog.Logger }

func (p promLog) Println(v ...any) { p.l.Warn().Msg(fmt.Sprint(v...)) }

// diskSpace returns the bytes free to an unprivileged user and the size of
// the file system holding dir.
func diskSpace(dir string) (free, size uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}
