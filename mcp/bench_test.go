package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/metrics"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/warrenhq/warren/sandbox"
)

// BenchmarkShellExecOverhead measures what warren adds to a command
// outside the jail: shell_exec 'echo hi' handled in process (mcp-go, the
// middlewares, the session manager with its guard and quota, the job, the
// activity log and the meter, as 'serve' sets them up) against a bare
// mcp-go tool that runs the same command on a bare sandbox.Shell and
// returns warren's own result, interleaved. The difference of the medians
// is warren's own time, with neither transport; the stdio benchmark
// against the physical floor is in cmd/warren.
// Run: go test -run X -bench ShellExecOverhead ./mcp/
func BenchmarkShellExecOverhead(b *testing.B) {
	ctx := context.Background()
	srv, _ := newJailServer(b, Options{})
	call := json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell_exec","arguments":{"command":"echo hi"}}}`)
	userCtx := WithUser(ctx, testUser)
	var payload struct {
		Result struct {
			Content    []mcp.TextContent `json:"content"`
			Structured map[string]any    `json:"structuredContent"`
		} `json:"result"`
	}
	out, _ := json.Marshal(srv.MCPServer().HandleMessage(userCtx, call))
	if err := json.Unmarshal(out, &payload); err != nil || len(payload.Result.Content) != 1 {
		b.Fatalf("shell_exec echo hi: %s", out)
	}

	bare, err := sandbox.NewShell(sandbox.DefaultProfile(b.TempDir()), sandbox.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer bare.Close()
	floorSrv := server.NewMCPServer("floor", "1")
	floorSrv.AddTool(mcp.NewTool("shell_exec"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := bare.Exec(ctx, req.GetString("command", ""), sandbox.ExecOptions{Timeout: time.Minute})
		if err != nil || string(res.Stdout) != "hi\n" {
			return nil, fmt.Errorf("bare echo hi: %v %q", err, res.Stdout)
		}
		return mcp.NewToolResultStructured(payload.Result.Structured, payload.Result.Content[0].Text), nil
	})
	run := func(s *server.MCPServer, ctx context.Context) time.Duration {
		start := time.Now()
		resp := s.HandleMessage(ctx, call)
		d := time.Since(start)
		if out, _ := json.Marshal(resp); !strings.Contains(string(out), `hi\n`) || strings.Contains(string(out), `"isError":true`) {
			b.Fatalf("shell_exec echo hi: %s", out)
		}
		return d
	}
	warren := func() time.Duration { return run(srv.MCPServer(), userCtx) }
	floor := func() time.Duration { return run(floorSrv, ctx) }
	for range 50 { // start both jails, fill caches
		warren()
		floor()
	}
	// CPU time is measured too: the machine is shared, and the time a
	// call takes varies with the load more than the work it does.
	// So are the goroutines started and the objects allocated: counts
	// that do not depend on the load.
	var got, bases []time.Duration
	var cpuWarren, cpuBare time.Duration
	var counts [2]counters // floor, warren
	b.ResetTimer()
	for range b.N {
		c0, n0 := cpuTime(), readCounters()
		bases = append(bases, floor())
		c1, n1 := cpuTime(), readCounters()
		got = append(got, warren())
		c2, n2 := cpuTime(), readCounters()
		cpuBare += c1 - c0
		cpuWarren += c2 - c1
		counts[0].add(n1, n0)
		counts[1].add(n2, n1)
	}
	b.StopTimer()
	p50 := func(ds []time.Duration) float64 {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return float64(ds[len(ds)/2]) / float64(time.Microsecond)
	}
	// The median of each call's difference with the floor call next to it
	// follows the machine's load less than the difference of the medians.
	diffs := make([]time.Duration, len(got))
	for i := range got {
		diffs[i] = got[i] - bases[i]
	}
	paired := p50(diffs)
	w, f := p50(got), p50(bases)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(w, "shell_exec-p50-µs")
	b.ReportMetric(f, "floor-p50-µs")
	b.ReportMetric(w-f, "warren-µs")
	b.ReportMetric(paired, "warren-paired-µs")
	perCall := func(d time.Duration) float64 { return float64(d) / float64(b.N) / float64(time.Microsecond) }
	b.ReportMetric(perCall(cpuWarren-cpuBare), "warren-cpu-µs")
	b.ReportMetric((float64(counts[1].goroutines)-float64(counts[0].goroutines))/float64(b.N), "warren-goroutines/op")
	b.ReportMetric((float64(counts[1].allocs)-float64(counts[0].allocs))/float64(b.N), "warren-allocs/op")
}

// counters are the runtime's counts of goroutines started and heap objects
// allocated.
type counters struct{ goroutines, allocs uint64 }

var counterNames = []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}, {Name: "/gc/heap/allocs:objects"}}

func readCounters() counters {
	s := append([]metrics.Sample(nil), counterNames...)
	metrics.Read(s)
	return counters{s[0].Value.Uint64(), s[1].Value.Uint64()}
}

// add adds the counts between from and to.
func (c *counters) add(to, from counters) {
	c.goroutines += to.goroutines - from.goroutines
	c.allocs += to.allocs - from.allocs
}

// cpuTime is the CPU time this process used so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
