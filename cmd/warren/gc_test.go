package main

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
)

// The servers collect garbage less often than Go's default, unless the
// operator set GOGC or GOMEMLIMIT, which always win.
func TestServeTunesTheGCUnlessTheOperatorDid(t *testing.T) {
	restore := func() { debug.SetGCPercent(100); debug.SetMemoryLimit(math.MaxInt64) }
	t.Cleanup(restore)

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	restore()
	tuneGC(nil)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, the GC percent became %d, want the operator's 100", got)
	}

	unsetEnv(t, "GOGC")
	unsetEnv(t, "GOMEMLIMIT")
	restore()
	tuneGC(nil)
	if got := debug.SetGCPercent(100); got != serverGCPercent {
		t.Errorf("GC percent %d, want %d", got, serverGCPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != serverMemoryLimit {
		t.Errorf("memory limit %d, want %d", got, serverMemoryLimit)
	}
}

// unsetEnv removes key for the test, restoring it after.
func unsetEnv(t *testing.T, key string) {
	t.Setenv(key, "")
	os.Unsetenv(key)
}
