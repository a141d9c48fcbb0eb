package main

// Benchmarks measure each warren call against its floor in the same run,
// interleaved, because this machine's absolute times drift:
//   - the MCP floor is a bare mcp-go stdio server whose tool does nothing
//     (this test binary re-executed with WARREN_BENCH_FLOOR=1), driven by
//     the same go-sdk client;
//   - the shell floor is the jailed /bin/sh driven over its pipes by
//     package sandbox, without MCP.
// Run: just bench-mcp (go test -run '^$' -bench . ./cmd/warren).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/sandbox"
)

func init() {
	// The MCP floor: serve one no-op tool on stdio and exit.
	if os.Getenv("WARREN_BENCH_FLOOR") != "1" {
		return
	}
	s := server.NewMCPServer("floor", "1")
	s.AddTool(mcpgo.NewTool("noop"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText(""), nil
	})
	// The same payload read_file returns for a 4 KB file, without reading
	// anything: what carrying 4 KB twice (text and structured) costs.
	s.AddTool(mcpgo.NewTool("payload4k"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultStructured(map[string]any{"path": "/workspace/4k.txt", "content": bench4k,
			"total_lines": 256, "truncated": false}, bench4k), nil
	})
	if err := server.ServeStdio(s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// bench4k is the 4 KB file read_file reads in the benchmark.
var bench4k = strings.Repeat("abcdefghijklmno\n", 256)

// timed collects durations and reports their median.
type timed []time.Duration

func (t timed) p50() time.Duration {
	s := append(timed(nil), t...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func mustCall(b *testing.B, c *client, name string, args map[string]any) time.Duration {
	start := time.Now()
	res, err := c.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	d := time.Since(start)
	if err != nil || res.IsError {
		b.Fatalf("%s: %v %s", name, err, textOf(res))
	}
	return d
}

func BenchmarkStdioAgainstFloors(b *testing.B) {
	needJail(b)
	ws := jailDir(b)
	if err := os.WriteFile(filepath.Join(ws, "4k.txt"), []byte(bench4k), 0o644); err != nil {
		b.Fatal(err)
	}
	floorCmd := exec.Command(os.Args[0])
	floorCmd.Env = append(os.Environ(), "WARREN_BENCH_FLOOR=1")
	floor := connect(b, &sdk.CommandTransport{Command: floorCmd})
	warren := serveStdio(b, "--workspace", ws, "--data-dir", jailDir(b))
	sh, err := sandbox.NewShell(sandbox.DefaultProfile(jailDir(b)), sandbox.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer sh.Close()
	shellFloor := func() time.Duration {
		start := time.Now()
		res, err := sh.Exec(context.Background(), "echo hi", sandbox.ExecOptions{})
		d := time.Since(start)
		if err != nil || string(res.Stdout) != "hi\n" {
			b.Fatalf("shell floor: %v %q", err, res.Stdout)
		}
		return d
	}
	// Warm up: start the jails, fill caches.
	for range 20 {
		mustCall(b, floor, "noop", nil)
		shellFloor()
		mustCall(b, warren, "shell_exec", map[string]any{"command": "echo hi"})
		mustCall(b, warren, "read_file", map[string]any{"path": "4k.txt"})
	}
	var mcpF, payF, shF, exec, read timed
	b.ResetTimer()
	for range b.N {
		mcpF = append(mcpF, mustCall(b, floor, "noop", nil))
		payF = append(payF, mustCall(b, floor, "payload4k", nil))
		shF = append(shF, shellFloor())
		exec = append(exec, mustCall(b, warren, "shell_exec", map[string]any{"command": "echo hi"}))
		read = append(read, mustCall(b, warren, "read_file", map[string]any{"path": "4k.txt"}))
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(us(mcpF.p50()), "mcp-floor-p50-µs")
	b.ReportMetric(us(shF.p50()), "shell-floor-p50-µs")
	b.ReportMetric(us(exec.p50()), "shell_exec-p50-µs")
	b.ReportMetric(us(read.p50()), "read_file-p50-µs")
	// Targets: shell_exec ≤ 1.5 × (MCP floor + shell floor); read_file ≤ 1.5 × MCP floor.
	b.ReportMetric(float64(exec.p50())/float64(mcpF.p50()+shF.p50()), "shell_exec/floors")
	b.ReportMetric(float64(read.p50())/float64(mcpF.p50()), "read_file/mcp-floor")
	// What warren adds to carrying the same 4 KB result.
	b.ReportMetric(us(payF.p50()), "payload4k-floor-p50-µs")
	b.ReportMetric(float64(read.p50())/float64(payF.p50()), "read_file/payload-floor")
}

// BenchmarkConcurrentShellExec drives 8 clients, each its own user and so
// its own session, against one 'serve http' limited to two cores
// (GOMAXPROCS=2 for the server; the jails are not pinned). Target: ≥ 3,000
// calls/s.
func BenchmarkConcurrentShellExec(b *testing.B) {
	needJail(b)
	const clients = 8
	data := jailDir(b)
	tokens := make([]string, clients)
	for i := range tokens {
		tokens[i] = createToken(b, data, fmt.Sprintf("bench%d", i))
	}
	b.Setenv("GOMAXPROCS", "2")
	srv := serveHTTP(b, "--data-dir", data)
	cs := make([]*client, clients)
	for i := range cs {
		cs[i] = connectHTTP(b, srv, tokens[i])
		for range 10 {
			mustCall(b, cs[i], "shell_exec", map[string]any{"command": "echo hi"})
		}
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	per := max(b.N/clients, 1)
	for _, c := range cs {
		wg.Go(func() {
			for range per {
				mustCall(b, c, "shell_exec", map[string]any{"command": "echo hi"})
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.ReportMetric(float64(per*clients)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(runtime.NumCPU()), "host-cpus")
}
