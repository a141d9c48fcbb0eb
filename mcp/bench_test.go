package mcp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/events"
)

// BenchmarkShellExecOverhead measures what warren adds to a command
// outside the jail: shell_exec 'echo hi' handled in process (mcp-go, the
// middlewares, the session manager with its guard and quota, the job, the
// activity log and the meter, as 'serve' sets them up) against the same
// command on a bare sandbox.Shell, interleaved. The difference of the
// medians is warren's own time; the stdio benchmark against the physical
// floor is in cmd/warren. Run: go test -run X -bench ShellExecOverhead ./mcp/
func BenchmarkShellExecOverhead(b *testing.B) {
	ctx := context.Background()
	data, ws := b.TempDir(), b.TempDir()
	for _, d := range []string{data, ws} { // the jail's uid must reach them
		if err := os.Chmod(filepath.Dir(d), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	db := openTestDB(b)
	store, err := sessions.NewStore(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	mgr, err := sessions.NewManager(store, sessions.Config{DataDir: data, BindDir: ws, AllowLocalSources: true,
		QuotaBytes: 10 << 30, QuotaInterval: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer mgr.Close(ctx)
	activity, err := events.Open(ctx, db, events.Options{Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer activity.Close()
	meter, err := metering.Open(ctx, db, metering.Options{})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(Options{Sessions: mgr, Meter: meter, Events: activity, Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	bare, err := sandbox.NewShell(sandbox.DefaultProfile(b.TempDir()), sandbox.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer bare.Close()

	call := json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell_exec","arguments":{"command":"echo hi"}}}`)
	userCtx := WithUser(ctx, "alice")
	warren := func() time.Duration {
		start := time.Now()
		resp := srv.MCPServer().HandleMessage(userCtx, call)
		d := time.Since(start)
		if out, _ := json.Marshal(resp); !strings.Contains(string(out), `hi\n`) || strings.Contains(string(out), `"isError":true`) {
			b.Fatalf("shell_exec echo hi: %s", out)
		}
		return d
	}
	floor := func() time.Duration {
		start := time.Now()
		res, err := bare.Exec(ctx, "echo hi", sandbox.ExecOptions{Timeout: time.Minute})
		d := time.Since(start)
		if err != nil || string(res.Stdout) != "hi\n" {
			b.Fatalf("bare echo hi: %v %q", err, res.Stdout)
		}
		return d
	}
	for range 50 { // start both jails, fill caches
		warren()
		floor()
	}
	// CPU time is measured too: the machine is shared, and the time a
	// call takes varies with the load more than the work it does.
	var got, bases []time.Duration
	var cpuWarren, cpuBare time.Duration
	b.ResetTimer()
	for range b.N {
		c0 := cpuTime()
		bases = append(bases, floor())
		c1 := cpuTime()
		got = append(got, warren())
		c2 := cpuTime()
		cpuBare += c1 - c0
		cpuWarren += c2 - c1
	}
	b.StopTimer()
	p50 := func(ds []time.Duration) float64 {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return float64(ds[len(ds)/2]) / float64(time.Microsecond)
	}
	w, f := p50(got), p50(bases)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(w, "shell_exec-p50-µs")
	b.ReportMetric(f, "bare-exec-p50-µs")
	b.ReportMetric(w-f, "warren-µs")
	perCall := func(d time.Duration) float64 { return float64(d) / float64(b.N) / float64(time.Microsecond) }
	b.ReportMetric(perCall(cpuWarren-cpuBare), "warren-cpu-µs")
}

// cpuTime is the CPU time this process used so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
