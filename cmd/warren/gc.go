package main

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/urfave/cli/v2"
)

// Garbage collection defaults for the servers, unless the operator's GOGC
// or GOMEMLIMIT say otherwise. A server's live heap is small (a few MB
// for a handful of sessions), so at Go's default (GOGC=100) it collects
// every hundred calls or so, and each collection's background work
// competes with the jails for the cores. GOGC=200 halves that; GOGC=400
// cut warren's own time in a shell_exec further (57-65 µs to 49-53 µs in
// BenchmarkShellExecOverhead in mcp, no difference in shell_exec/floor
// over stdio) but doubled what a server holds while it streams output:
// peak RSS streaming 190 MB of progress was 67-74 MB at GOGC=100, 84-90 MB
// at 200, and 131-180 MB at 400 (TestHTTPProgressMemoryIsBounded). The
// soft limit keeps a server with a big heap from growing to three times
// it.
const (
	serverGCPercent   = 200
	serverMemoryLimit = 1 << 30
)

// tuneGC applies the defaults above; the Before of 'warren serve'.
func tuneGC(*cli.Context) error {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(serverGCPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(serverMemoryLimit)
	}
	return nil
}

// Idle trimming: Go keeps the heap pages it freed (up to about the heap
// goal, 8 MB here at GOGC=200) for the next allocations, which is right
// for a busy server and a waste for one that sits idle in an IDE between
// prompts. A server whose allocations stopped (less than idleAllocBytes in
// idleCheckEvery) returns its free pages to the system once, then waits
// for the next burst of work. Measured by BenchmarkIdleRSS: the start-up's
// garbage and the first tools/list's were 2-4 MB of an idle server's RSS.
const (
	idleCheckEvery = 2 * time.Second
	idleAllocBytes = 64 << 10
)

// trimWhenIdle runs until ctx ends; started by both servers.
func trimWhenIdle(ctx context.Context) {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocated := func() uint64 {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return sample[0].Value.Uint64()
	}
	t := time.NewTicker(idleCheckEvery)
	defer t.Stop()
	last, trimmed := allocated(), false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := allocated()
		busy := now-last >= idleAllocBytes
		last = now
		switch {
		case busy:
			trimmed = false
		case !trimmed:
			debug.FreeOSMemory()
			releaseImagePages()
			trimmed, last = true, allocated() // the collection's own allocations are not work
		}
	}
}
