package main

import (
	"context"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// keptSpans is an exporter that keeps what it is given, also across
// Shutdown (the SDK's in-memory exporter forgets at Shutdown).
type keptSpans struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (k *keptSpans) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.spans = append(k.spans, spans...)
	return nil
}

func (*keptSpans) Shutdown(context.Context) error { return nil }

// ids returns how many spans were exported and how many distinct ones.
func (k *keptSpans) ids() (n, distinct int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	seen := map[trace.SpanID]bool{}
	for _, s := range k.spans {
		seen[s.SpanContext().SpanID()] = true
	}
	return len(k.spans), len(seen)
}

// waitFor polls until n spans were exported, for at most 10 s.
func (k *keptSpans) waitFor(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got, _ := k.ids(); got >= n {
			return
		}
	}
	got, _ := k.ids()
	t.Fatalf("%d spans exported, want %d", got, n)
}

// gathered is a tracer whose spans go through a spanGather to the SDK's
// batch processor and exp.
// Its queue holds cfg.max spans: what these tests flood must not be
// dropped by the batch processor, which drops what overflows its queue.
func gathered(t *testing.T, cfg gatherConfig, exp sdktrace.SpanExporter) (trace.Tracer, *spanGather, *sdktrace.TracerProvider) {
	bsp := sdktrace.NewBatchSpanProcessor(exp, sdktrace.WithBatchTimeout(10*time.Millisecond), sdktrace.WithMaxQueueSize(cfg.max))
	g := newSpanGather(bsp, cfg)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(g))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("test"), g, tp
}

// TestSpanGatherExportsEverySpanOnce: spans ended from many goroutines at
// once, while hand-overs and flushes run, all reach the exporter, once.
func TestSpanGatherExportsEverySpanOnce(t *testing.T) {
	exp := &keptSpans{}
	tr, _, tp := gathered(t, gatherConfig{delay: time.Millisecond, kick: 16, max: 10_000}, exp)
	const workers, each = 8, 500
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				_, s := tr.Start(context.Background(), "work")
				s.End()
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			_ = tp.ForceFlush(context.Background())
		}
	})
	wg.Wait()
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, distinct := exp.ids(); n != workers*each || distinct != n {
		t.Errorf("%d spans exported (%d distinct), want each of %d once", n, distinct, workers*each)
	}
}

// TestSpanGatherExportsWithoutBeingAsked: spans are exported with nobody
// flushing, a few after the delay, a full batch at once.
func TestSpanGatherExportsWithoutBeingAsked(t *testing.T) {
	exp := &keptSpans{}
	tr, _, _ := gathered(t, gatherConfig{delay: 20 * time.Millisecond, kick: 1000, max: 2000}, exp)
	for range 3 {
		_, s := tr.Start(context.Background(), "few")
		s.End()
	}
	exp.waitFor(t, 3)

	exp = &keptSpans{}
	tr, _, _ = gathered(t, gatherConfig{delay: time.Hour, kick: 50, max: 2000}, exp)
	for range 50 {
		_, s := tr.Start(context.Background(), "batch")
		s.End()
	}
	exp.waitFor(t, 50)
}

// TestSpanGatherShutdownExportsWhatWaits: spans still waiting when the
// provider shuts down are exported; spans ended later are dropped.
func TestSpanGatherShutdownExportsWhatWaits(t *testing.T) {
	exp := &keptSpans{}
	tr, _, tp := gathered(t, gatherConfig{delay: time.Hour, kick: 1000, max: 2000}, exp)
	for range 5 {
		_, s := tr.Start(context.Background(), "waiting")
		s.End()
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, late := tr.Start(context.Background(), "late")
	late.End()
	if n, _ := exp.ids(); n != 5 {
		t.Errorf("%d spans exported at shutdown, want the 5 waiting", n)
	}
}

// stuck is a span processor whose OnEnd blocks until released, like the
// batch processor's queue behind an exporter that does not answer.
type stuck struct {
	sdktrace.SpanProcessor
	release chan struct{}
	mu      sync.Mutex
	got     int
}

func (s *stuck) OnEnd(sdktrace.ReadOnlySpan) {
	<-s.release
	s.mu.Lock()
	s.got++
	s.mu.Unlock()
}

// TestSpanGatherIsBounded: when the hand-over is stuck, at most max spans
// wait; the rest are dropped instead of growing memory without end.
func TestSpanGatherIsBounded(t *testing.T) {
	next := &stuck{SpanProcessor: sdktrace.NewSimpleSpanProcessor(&keptSpans{}), release: make(chan struct{})}
	g := newSpanGather(next, gatherConfig{delay: time.Hour, kick: 1, max: 100})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(g))
	tr := tp.Tracer("test")
	for range 1000 {
		_, s := tr.Start(context.Background(), "flood")
		s.End()
	}
	g.mu.Lock()
	waiting := len(g.buf)
	g.mu.Unlock()
	if waiting > 100 {
		t.Errorf("%d spans wait behind a stuck hand-over, want at most 100", waiting)
	}
	close(next.release)
	_ = tp.ForceFlush(context.Background())
	next.mu.Lock()
	defer next.mu.Unlock()
	if next.got < 1 || next.got > 200 {
		t.Errorf("%d spans handed over, want between 1 and 200 (at most 100 in the hand-over and 100 waiting)", next.got)
	}
}
