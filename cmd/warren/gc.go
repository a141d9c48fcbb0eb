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
// competes with the jails for the cores: on a 2-core machine GOGC=400 cut
// warren's own time in a shell_exec from 57-65 µs to 49-53 µs
// (BenchmarkShellExecOverhead in mcp). The soft limit keeps a server with
// a big heap from growing to five times it.
const (
	serverGCPercent   = 400
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
