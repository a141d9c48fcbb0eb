package main

// Benchmarks measure each warren call against its physical floor in the
// same run, interleaved, because this machine's absolute times drift. The
// floor of a tool is a bare mcp-go stdio server (this test binary
// re-executed with WARREN_BENCH_FLOOR set) whose tool returns the very
// payload warren returned for the same call, captured during warm-up, and
// for shell_exec also runs the command in a persistent jailed /bin/sh over
// a pipe first, for write_file writes the content atomically (a new file,
// then a rename): what no implementation can avoid. Each ratio is reported as
// `TOOL/floor`; `just bench-check` fails when one misses its target
// (targets live in cmd/benchcheck). Run: just bench-mcp.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
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

// floorPayload is what a floor tool returns: warren's own result.
type floorPayload struct {
	Text       string         `json:"text"`
	Structured map[string]any `json:"structured"`
}

func init() {
	spec := os.Getenv("WARREN_BENCH_FLOOR")
	if spec == "" {
		return
	}
	var payloads map[string]floorPayload
	if err := json.Unmarshal([]byte(spec), &payloads); err != nil {
		fmt.Fprintln(os.Stderr, "WARREN_BENCH_FLOOR:", err)
		os.Exit(2)
	}
	var jail *rawJail
	s := server.NewMCPServer("floor", "1")
	for name, p := range payloads {
		s.AddTool(mcpgo.NewTool(name), func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			args := req.GetArguments()
			if cmd, ok := args["command"].(string); ok {
				if jail == nil {
					jail = startRawJail(os.Getenv("WARREN_BENCH_WS"))
				}
				jail.run(cmd)
			}
			if content, ok := args["content"].(string); ok {
				if err := writeAtomic(filepath.Join(os.Getenv("WARREN_BENCH_WS"), "floor-out.txt"), content); err != nil {
					return nil, err
				}
			}
			return mcpgo.NewToolResultStructured(p.Structured, p.Text), nil
		})
	}
	if err := server.ServeStdio(s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// rawJail is /bin/sh in a jail built from the default profile, driven line
// by line: the least any shell_exec can cost.
type rawJail struct {
	in  io.Writer
	out *bufio.Scanner
}

func startRawJail(ws string) *rawJail {
	bwrap, err := sandbox.FindBwrap("")
	if err == nil {
		cmd := exec.Command(bwrap, sandbox.BwrapArgs(sandbox.DefaultProfile(ws), sandbox.JailFDs{Info: -1, Seccomp: -1}, "/bin/sh")...)
		var in io.WriteCloser
		var out io.ReadCloser
		if in, err = cmd.StdinPipe(); err == nil {
			if out, err = cmd.StdoutPipe(); err == nil {
				if err = cmd.Start(); err == nil {
					return &rawJail{in: in, out: bufio.NewScanner(out)}
				}
			}
		}
	}
	fmt.Fprintln(os.Stderr, "raw jail:", err)
	os.Exit(1)
	return nil
}

// run sends command and reads its output up to a line ".".
func (j *rawJail) run(command string) {
	fmt.Fprintf(j.in, "%s; echo .\n", command)
	for j.out.Scan() && j.out.Text() != "." {
	}
}

// writeAtomic is the least a write_file that keeps a file whole can do: a
// new file in the same directory, its content, then a rename over the old
// name (ext4 then starts writing the data out, what keeps a crash from
// leaving an empty file: the physical cost warren pays too).
func writeAtomic(name, content string) error {
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	return err
}

// bench4k is the 4 KB file read_file reads and write_file writes.
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

// payloadOf captures a result as a floor tool will return it.
func payloadOf(b *testing.B, c *client, name string, args map[string]any) floorPayload {
	res, err := c.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil || res.IsError {
		b.Fatalf("%s: %v %s", name, err, textOf(res))
	}
	return floorPayload{Text: textOf(res), Structured: structured(b, res)}
}

func BenchmarkStdioAgainstFloors(b *testing.B) {
	needJail(b)
	ws := jailDir(b)
	if err := os.WriteFile(filepath.Join(ws, "4k.txt"), []byte(bench4k), 0o644); err != nil {
		b.Fatal(err)
	}
	warren := serveStdio(b, "--workspace", ws, "--data-dir", jailDir(b))
	calls := map[string]map[string]any{
		"shell_exec": {"command": "echo hi"},
		"read_file":  {"path": "4k.txt"},
		"write_file": {"path": "out.txt", "content": bench4k},
	}
	payloads := map[string]floorPayload{}
	for name, args := range calls {
		payloads[name] = payloadOf(b, warren, name, args)
	}
	spec, _ := json.Marshal(payloads)
	floorCmd := exec.Command(os.Args[0])
	floorCmd.Env = append(os.Environ(), "WARREN_BENCH_FLOOR="+string(spec), "WARREN_BENCH_WS="+jailDir(b))
	floor := connect(b, &sdk.CommandTransport{Command: floorCmd})
	other := otherWarren(b)
	names := []string{"shell_exec", "read_file", "write_file"}
	if only := os.Getenv("WARREN_BENCH_TOOLS"); only != "" { // e.g. shell_exec, to profile one tool
		names = strings.Split(only, ",")
	}
	servers := []*client{floor, warren}
	if other != nil {
		servers = append(servers, other)
	}
	for range 20 { // warm up: start the jails, fill caches
		for _, n := range names {
			for _, c := range servers {
				mustCall(b, c, n, calls[n])
			}
		}
	}
	got, floors, others := map[string]timed{}, map[string]timed{}, map[string]timed{}
	b.ResetTimer()
	for i := range b.N {
		for _, n := range names {
			floors[n] = append(floors[n], mustCall(b, floor, n, calls[n]))
			if other == nil {
				got[n] = append(got[n], mustCall(b, warren, n, calls[n]))
				continue
			}
			// The two versions take turns at going first after the floor.
			first, second, firstT, secondT := warren, other, got, others
			if i%2 == 1 {
				first, second, firstT, secondT = other, warren, others, got
			}
			firstT[n] = append(firstT[n], mustCall(b, first, n, calls[n]))
			secondT[n] = append(secondT[n], mustCall(b, second, n, calls[n]))
		}
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	for _, n := range names {
		b.ReportMetric(us(got[n].p50()), n+"-p50-µs")
		b.ReportMetric(us(floors[n].p50()), n+"-floor-p50-µs")
		b.ReportMetric(float64(got[n].p50())/float64(floors[n].p50()), n+"/floor")
		if other != nil {
			b.ReportMetric(float64(others[n].p50())/float64(floors[n].p50()), n+"/floor-other")
		}
	}
}

// otherWarren starts the warren binary $WARREN_BENCH_OTHER names (another
// version, with its own warren-runner beside it), whose calls the benchmark
// interleaves with this version's and the floor's: two versions compared
// in one run differ by what they do, not by how busy the machine was
// (runs minutes apart differ by ±0.05 in a ratio, one run's two versions
// by less than 0.01). nil without it.
func otherWarren(b *testing.B) *client {
	bin := os.Getenv("WARREN_BENCH_OTHER")
	if bin == "" {
		return nil
	}
	ws := jailDir(b)
	if err := os.WriteFile(filepath.Join(ws, "4k.txt"), []byte(bench4k), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "stdio", "--workspace", ws, "--data-dir", jailDir(b))
	cmd.Env = append(os.Environ(), sandbox.RunnerEnv+"="+filepath.Join(filepath.Dir(bin), sandbox.RunnerName))
	cmd.Stderr = newTestLog(b, "other: ")
	return connect(b, &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second})
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
