package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The package's metrics. They count from process start whether or not
// anything collects them (an atomic add each); RegisterMetrics exposes
// them.
var (
	jailsLive = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "warren_sandbox_jails_live",
		Help: "Jails (bwrap processes with their shell) running now.",
	})
	jailStarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warren_sandbox_jail_starts_total",
		Help: "Jail starts, by result (ok or error).",
	}, []string{"result"})
	jailStartSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "warren_sandbox_jail_start_duration_seconds",
		Help:    "Time to start a jail: cgroup, workspace preparation on first start, bwrap and the shell's init.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	})
	commands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warren_sandbox_commands_total",
		Help: "Commands run in jails, by how they ended: completed (any exit code), timed_out or interrupted.",
	}, []string{"end"})
	commandSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "warren_sandbox_command_duration_seconds",
		Help:    "Wall-clock time of commands run in jails.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
	})
	oomKills      = newOOMCollector()
	shellRestarts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "warren_sandbox_shell_restarts_total",
		Help: "Shells restarted with their saved state because a command killed, replaced or wedged them.",
	})
)

// RegisterMetrics registers the package's metrics with r.
func RegisterMetrics(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{jailsLive, jailStarts, jailStartSeconds, commands, commandSeconds, oomKills, shellRestarts} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	// Both label values exist from the start, so that rate() sees the
	// first one.
	jailStarts.WithLabelValues("ok")
	jailStarts.WithLabelValues("error")
	for _, e := range []string{"completed", "timed_out", "interrupted"} {
		commands.WithLabelValues(e)
	}
	return nil
}

// tracer makes the package's spans; without a configured provider it is
// the global no-op.
var tracer = otel.Tracer("github.com/warrenhq/warren/sandbox")

// Exec runs command in the shell and returns its result. It waits for the
// shell's turn (or fails with ErrBusy under NoWait), starts the jail if
// needed, and returns an error only when the command could not be run. A
// timeout or a cancelled ctx kills the command, not the shell; a command
// that kills the shell gets its result and a fresh shell with the saved
// state.
//
// This wrapper counts and traces the command; exec does the work.
func (s *Shell) Exec(ctx context.Context, command string, opts ExecOptions) (Result, error) {
	ctx, span := tracer.Start(ctx, "sandbox.exec")
	if done := opts.Detached; done != nil {
		opts.Detached = func(res Result, err error) {
			observeExec(span, res, err)
			done(res, err)
		}
	}
	res, err := s.exec(ctx, command, opts)
	if err == ErrDetached {
		return res, err // observed when it ends
	}
	observeExec(span, res, err)
	return res, err
}

// observeExec counts a command's end and ends its span.
func observeExec(span trace.Span, res Result, err error) {
	if err == nil {
		end := "completed"
		switch {
		case res.TimedOut:
			end = "timed_out"
		case res.Interrupted:
			end = "interrupted"
		}
		commands.WithLabelValues(end).Inc()
		commandSeconds.Observe(res.Duration.Seconds())
		if res.ShellRestarted {
			shellRestarts.Inc()
		}
		if span.IsRecording() {
			span.SetAttributes(attribute.Int("exit_code", res.ExitCode), attribute.String("end", end),
				attribute.Bool("shell_restarted", res.ShellRestarted))
		}
	} else {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// startJail returns the running jail, starting one (counted, timed and
// traced) when there is none. Called with the turn held.
func (s *Shell) startTraced(ctx context.Context) (*jail, error) {
	s.mu.Lock()
	running := s.jail != nil && s.jail.alive()
	s.mu.Unlock()
	if running {
		return s.ensureJail()
	}
	_, span := tracer.Start(ctx, "sandbox.jail_start")
	start := time.Now()
	j, err := s.ensureJail()
	jailStartSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		jailStarts.WithLabelValues("error").Inc()
		span.SetStatus(codes.Error, err.Error())
	} else {
		jailStarts.WithLabelValues("ok").Inc()
	}
	span.End()
	return j, err
}

// oomCount remembers a cgroup's oom_kill count at the last look, so that
// each kill is counted once.
type oomCount struct {
	mu   sync.Mutex
	seen int64
}

// oomCollector is warren_sandbox_oom_kills_total. The kernel counts OOM
// kills per cgroup (memory.events on v2, memory.oom_control on v1); the
// collector reads the counts of the live jails' cgroups when it is
// collected, and a cgroup's once more as it is removed, so that no command
// pays for reading a cgroup file (it was a tenth of a small command's
// time). A jail without a cgroup has no memory limit to be killed at.
type oomCollector struct {
	desc *prometheus.Desc

	mu    sync.Mutex
	total int64 // kills counted so far
	live  map[*cgroup]struct{}
}

func newOOMCollector() *oomCollector {
	return &oomCollector{
		desc: prometheus.NewDesc("warren_sandbox_oom_kills_total",
			"Processes in jails killed by the kernel for exceeding the jail's memory limit (cgroup oom_kill count).", nil, nil),
		live: map[*cgroup]struct{}{},
	}
}

// Describe implements prometheus.Collector.
func (c *oomCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector: it counts the kills of every
// live jail since the last look.
func (c *oomCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	for cg := range c.live {
		c.total += cg.newOOMKills()
	}
	total := c.total
	c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(total))
}

// watch starts counting the kills of a jail's cgroup.
func (c *oomCollector) watch(cg *cgroup) {
	c.mu.Lock()
	c.live[cg] = struct{}{}
	c.mu.Unlock()
}

// forget counts a cgroup's last kills and stops watching it; called before
// the cgroup is removed. Cgroups never watched are left alone.
func (c *oomCollector) forget(cg *cgroup) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.live[cg]; ok {
		c.total += cg.newOOMKills()
		delete(c.live, cg)
	}
}

// newOOMKills returns the kills in cg since the last look.
func (cg *cgroup) newOOMKills() int64 {
	if len(cg.dirs) == 0 {
		return 0
	}
	file := filepath.Join(cg.dirs[0], "memory.events")
	if !cg.v2 {
		if len(cg.dirs) < 2 { // v1: dirs follow v1Controllers (pids, memory, cpu)
			return 0
		}
		file = filepath.Join(cg.dirs[1], "memory.oom_control")
	}
	n, ok := readOOMKills(file)
	if !ok {
		return 0
	}
	cg.oom.mu.Lock()
	defer cg.oom.mu.Unlock()
	d := max(n-cg.oom.seen, 0)
	cg.oom.seen = max(cg.oom.seen, n)
	return d
}

// readOOMKills reads the "oom_kill N" line of a cgroup memory file.
func readOOMKills(file string) (int64, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
