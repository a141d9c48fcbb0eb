package sandbox

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// metricsNow reads the package's counters the tests look at.
type metricsNow struct{ starts, completed, timedOut, oom, restarts, live float64 }

func readMetrics() metricsNow {
	return metricsNow{
		starts:    testutil.ToFloat64(jailStarts.WithLabelValues("ok")),
		completed: testutil.ToFloat64(commands.WithLabelValues("completed")),
		timedOut:  testutil.ToFloat64(commands.WithLabelValues("timed_out")),
		oom:       testutil.ToFloat64(oomKills),
		restarts:  testutil.ToFloat64(shellRestarts),
		live:      testutil.ToFloat64(jailsLive),
	}
}

// A jail start, a completed command, a timeout, a shell restart and an
// OOM kill each move their counter by exactly one.
func TestMetricsCountWhatJailsDo(t *testing.T) {
	sh, _ := newTestShell(t, func(p *Profile) { p.Limits.MemoryBytes = 128 << 20 })
	requireCgroups(t, sh)
	sh.Stop() // the next command starts a fresh jail
	before := readMetrics()
	base := before
	mustRun(t, sh, "echo hi")
	after := readMetrics()
	if d := after.starts - before.starts; d != 1 {
		t.Errorf("jail starts moved by %v, want 1", d)
	}
	if d := after.completed - before.completed; d != 1 {
		t.Errorf("completed commands moved by %v, want 1", d)
	}
	if d := after.live - before.live; d != 1 {
		t.Errorf("live jails moved by %v, want 1", d)
	}

	before = readMetrics()
	res := mustRun(t, sh, "python3 -c 'b = bytearray(512 << 20)'")
	after = readMetrics()
	if res.ExitCode != 137 {
		t.Fatalf("memory hog exit %d, want 137 (OOM-killed); stderr %q", res.ExitCode, res.Stderr)
	}
	if d := after.oom - before.oom; d != 1 {
		t.Errorf("OOM kills moved by %v, want 1", d)
	}

	before = readMetrics()
	res = mustRun(t, sh, "sleep 30", ExecOptions{Timeout: 300 * time.Millisecond})
	after = readMetrics()
	if !res.TimedOut {
		t.Fatalf("sleep 30 with a 300 ms timeout: %+v, want timed out", res)
	}
	if d := after.timedOut - before.timedOut; d != 1 {
		t.Errorf("timed-out commands moved by %v, want 1", d)
	}

	before = readMetrics()
	mustRun(t, sh, "exit 3")
	after = readMetrics()
	if d := after.restarts - before.restarts; d != 1 {
		t.Errorf("shell restarts moved by %v, want 1", d)
	}
	if d := after.oom - before.oom; d != 0 {
		t.Errorf("OOM kills moved by %v after a plain exit, want 0", d)
	}

	sh.Close()
	if d := readMetrics().live - base.live; d != 0 {
		t.Errorf("live jails after Close moved by %v, want 0", d)
	}
}

// The exposition passes the client library's lint.
func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if err := RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
