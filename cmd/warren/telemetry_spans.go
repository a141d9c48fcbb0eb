package main

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// spanGather sits in front of the SDK's batch span processor and hands it
// ended spans in bunches instead of one at a time.
//
// The batch processor sends every ended span down a channel to its export
// goroutine, which parks whenever the channel is empty: between calls it
// always is, so each span's End wakes that goroutine, a thread wake-up and
// a context switch (the costliest thing on a small virtual machine), four
// or five times per shell_exec. Here End appends to a slice under a mutex;
// a timer hands the slice over a few times a second, or at once when it
// holds an export batch, and the batch processor batches, queues and
// exports as it always does, with its OTEL_BSP_* settings.
//
// Spans reach the exporter at most gatherConfig.delay later than they
// would have. At most gatherConfig.max spans wait here, as many as the
// batch processor's queue holds: when the hand-over cannot keep up (the
// batch processor's queue full behind a slow exporter), later spans are
// dropped, as the batch processor drops them when its queue is full.
type spanGather struct {
	next sdktrace.SpanProcessor
	cfg  gatherConfig

	mu      sync.Mutex
	buf     []sdktrace.ReadOnlySpan
	armed   bool // the timer will hand buf over
	stopped atomic.Bool

	flushMu sync.Mutex              // one hand-over at a time
	spare   []sdktrace.ReadOnlySpan // buf's other half, owned by flush
	timer   *time.Timer
}

// gatherConfig says how long spans may wait and how many.
type gatherConfig struct {
	delay time.Duration // the longest an ended span waits
	kick  int           // hand over at once when this many wait
	max   int           // drop spans beyond this many
}

// gatherDelay is how long an ended span may wait for company: short next
// to the batch processor's own schedule (5 s by default).
const gatherDelay = 100 * time.Millisecond

// gatherConfigFromEnv follows the batch processor's settings: a hand-over
// per export batch (OTEL_BSP_MAX_EXPORT_BATCH_SIZE), no more waiting than
// its queue holds (OTEL_BSP_MAX_QUEUE_SIZE), and no longer than its
// schedule (OTEL_BSP_SCHEDULE_DELAY) when that is shorter than gatherDelay.
func gatherConfigFromEnv() gatherConfig {
	envInt := func(key string, def int) int {
		if n, err := strconv.Atoi(os.Getenv(key)); err == nil && n > 0 {
			return n
		}
		return def
	}
	c := gatherConfig{
		delay: min(gatherDelay, time.Duration(envInt("OTEL_BSP_SCHEDULE_DELAY", sdktrace.DefaultScheduleDelay))*time.Millisecond),
		kick:  envInt("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", sdktrace.DefaultMaxExportBatchSize),
		max:   envInt("OTEL_BSP_MAX_QUEUE_SIZE", sdktrace.DefaultMaxQueueSize),
	}
	c.kick = min(c.kick, c.max)
	return c
}

// newSpanGather returns a processor that gathers ended spans for next.
func newSpanGather(next sdktrace.SpanProcessor, cfg gatherConfig) *spanGather {
	g := &spanGather{next: next, cfg: cfg}
	g.timer = time.AfterFunc(time.Hour, g.flush)
	g.timer.Stop()
	return g
}

// OnStart passes the start on: the batch processor does nothing with it.
func (g *spanGather) OnStart(parent context.Context, s sdktrace.ReadWriteSpan) {
	g.next.OnStart(parent, s)
}

// OnEnd keeps s for the next hand-over.
func (g *spanGather) OnEnd(s sdktrace.ReadOnlySpan) {
	if g.stopped.Load() || !s.SpanContext().IsSampled() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.buf) >= g.cfg.max {
		return
	}
	g.buf = append(g.buf, s)
	switch {
	case len(g.buf) == g.cfg.kick:
		g.timer.Reset(0)
		g.armed = true
	case !g.armed:
		g.timer.Reset(g.cfg.delay)
		g.armed = true
	}
}

// flush hands the waiting spans to the batch processor.
func (g *spanGather) flush() {
	g.flushMu.Lock()
	defer g.flushMu.Unlock()
	g.mu.Lock()
	spans := g.buf
	g.buf, g.spare = g.spare[:0], nil
	g.armed = false
	g.mu.Unlock()
	for _, s := range spans {
		g.next.OnEnd(s)
	}
	clear(spans) // the batch processor holds them now
	g.spare = spans[:0]
}

// ForceFlush hands over the waiting spans and flushes the batch processor.
func (g *spanGather) ForceFlush(ctx context.Context) error {
	g.flush()
	return g.next.ForceFlush(ctx)
}

// Shutdown hands over the waiting spans, then shuts the batch processor
// down (it exports what it holds). Spans that end later are ignored.
func (g *spanGather) Shutdown(ctx context.Context) error {
	g.stopped.Store(true)
	g.timer.Stop()
	g.flush()
	return g.next.Shutdown(ctx)
}
