package sandbox

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// reportPercentiles adds p50 and p95 latencies to a benchmark's output.
func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[len(d)*95/100].Microseconds()), "p95-µs")
}

func benchExec(b *testing.B, command string) {
	sh, _ := newTestShell(b)
	ctx := context.Background()
	if _, err := sh.Exec(ctx, command, ExecOptions{}); err != nil { // warm: the jail is up
		b.Fatal(err)
	}
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := sh.Exec(ctx, command, ExecOptions{})
		d = append(d, time.Since(t0))
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
	}
	b.StopTimer()
	reportPercentiles(b, d)
}

// BenchmarkExecBuiltin: a builtin in a warm shell (target p50 ≤ 100 µs).
func BenchmarkExecBuiltin(b *testing.B) { benchExec(b, "echo hi") }

// BenchmarkExecExternal: an external command in a warm shell (target ≤ 1.2×
// BenchmarkForkExecShC).
func BenchmarkExecExternal(b *testing.B) { benchExec(b, "ls /") }

// BenchmarkForkExecShC is the floor for external commands: the host's own
// `sh -c 'ls /'` started from Go.
func BenchmarkForkExecShC(b *testing.B) {
	d := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := exec.Command("/bin/sh", "-c", "ls / >/dev/null").Run(); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(t0))
	}
	reportPercentiles(b, d)
}

// BenchmarkColdStart: a new Shell and its first command (target ≤ 40 ms).
func BenchmarkColdStart(b *testing.B) {
	dir := testWorkspace(b)
	ctx := context.Background()
	d := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		sh, err := NewShell(DefaultProfile(dir), Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sh.Exec(ctx, "echo hi", ExecOptions{}); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(t0))
		b.StopTimer()
		sh.Close()
		b.StartTimer()
	}
	reportPercentiles(b, d)
}
