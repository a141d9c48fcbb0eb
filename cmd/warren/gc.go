package main

import (
	"os"
	"runtime/debug"

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
