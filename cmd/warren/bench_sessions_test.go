package main

// BenchmarkSessions200: 200 sessions on one 'serve http', each running a
// command at the same time, on this 2-core machine. Run:
//   just bench-sessions   (go test -run '^$' -bench Sessions200 -benchtime 1x ./cmd/warren/)
// The scenario runs once per process however often the benchmark
// framework calls the function; it reports:
//   - create-p50/p95-ms: session_create (an empty workspace and its audit base);
//   - cold-exec-p50/p95-ms: the first shell_exec of each session, all 200 at
//     once: each starts its jail;
//   - warm-exec-p50/p95-ms: a third round, all 200 at once, jails running
//     and HTTP connections open (the second round opens them);
//   - server-rss-start-MB / server-rss-MB: VmRSS of the warren process at
//     start and with 200 sessions and their running jails;
//   - jail-pss-KB / jail-rss-KB: per idle jail, the processes of one jail
//     (outer bwrap, bwrap's init as pid 1, /bin/sh, warren-runner) summed: Pss from
//     /proc/<pid>/smaps_rollup (shared pages split among their users, so
//     200 jails' sums add up to what they really cost) and VmRSS (each
//     process's resident set, shared libraries counted in full every time);
//   - jail-pss/3MB: jail-pss-KB against the 3 MB target (just bench-check).

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type sessionsBench struct {
	once    sync.Once
	metrics map[string]float64
	err     error
}

var benchSessions sessionsBench

func BenchmarkSessions200(b *testing.B) {
	needJail(b)
	benchSessions.once.Do(func() { benchSessions.metrics, benchSessions.err = runSessionsBench(b, 200) })
	if benchSessions.err != nil {
		b.Fatal(benchSessions.err)
	}
	b.ReportMetric(0, "ns/op")
	keys := make([]string, 0, len(benchSessions.metrics))
	for k := range benchSessions.metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.ReportMetric(benchSessions.metrics[k], k)
	}
}

func percentile(ds []time.Duration, p float64) float64 {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[int(float64(len(s)-1)*p)]) / float64(time.Millisecond)
}

func runSessionsBench(b *testing.B, n int) (map[string]float64, error) {
	data := jailDir(b)
	srv := serveHTTP(b, "--data-dir", data, "--auth", "none", "--max-sessions-per-user", "0", "--max-shells", "0",
		"--max-shells-per-user", "0", "--memory-per-user", "0", "--cpus-per-user", "0",
		// 200 calls at once open 200 connections, from one address and
		// one user: no connection caps either.
		"--max-conns-per-client", "0", "--max-conns-per-user", "0") // one user, many sessions: measure the server, not the caps
	// Keep a connection per concurrent call: with Go's default of two idle
	// connections per host, 198 calls of every round would pay a TCP setup.
	c := connect(b, &sdk.StreamableClientTransport{Endpoint: srv.url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * n, MaxConnsPerHost: 2 * n}}})
	m := map[string]float64{}
	pid := srv.cmd.Process.Pid
	m["server-rss-start-MB"] = float64(statusKB(pid, "VmRSS")) / 1024

	ids := make([]string, n)
	creates := make([]time.Duration, n)
	for i := range ids {
		start := time.Now()
		res := c.ok("session_create", map[string]any{"name": fmt.Sprintf("bench-%d", i)})
		creates[i] = time.Since(start)
		ids[i] = res["session_id"].(string)
	}
	m["create-p50-ms"], m["create-p95-ms"] = percentile(creates, .5), percentile(creates, .95)

	round := func(command string) ([]time.Duration, error) {
		lat := make([]time.Duration, n)
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Go(func() {
				start := time.Now()
				res, err := c.cs.CallTool(context.Background(), sdkCall("shell_exec", map[string]any{"session_id": id, "command": command}))
				lat[i] = time.Since(start)
				if err != nil || res.IsError {
					errs <- fmt.Errorf("shell_exec in %s: %v %s", id, err, textOfMaybe(res))
				}
			})
		}
		wg.Wait()
		close(errs)
		return lat, <-errs
	}
	cold, err := round("echo hi")
	if err != nil {
		return nil, err
	}
	m["cold-exec-p50-ms"], m["cold-exec-p95-ms"] = percentile(cold, .5), percentile(cold, .95)
	if _, err := round("echo hi"); err != nil { // open the connections
		return nil, err
	}
	warm, err := round("echo hi")
	if err != nil {
		return nil, err
	}
	m["warm-exec-p50-ms"], m["warm-exec-p95-ms"] = percentile(warm, .5), percentile(warm, .95)

	time.Sleep(time.Second) // let the jails settle into idleness
	m["server-rss-MB"] = float64(statusKB(pid, "VmRSS")) / 1024
	jails := 0
	var pss, rss int64
	for _, child := range childPIDs(pid) {
		if comm(child) != "bwrap" {
			continue
		}
		jails++
		for _, p := range append([]int{child}, descendantPIDs(child)...) {
			pss += rollupKB(p, "Pss")
			rss += statusKB(p, "VmRSS")
		}
	}
	if jails < n {
		return nil, fmt.Errorf("found %d jails under the server, want %d", jails, n)
	}
	m["jails"] = float64(jails)
	m["jail-pss-KB"] = float64(pss) / float64(jails)
	// Issue 22's target: an idle jail, its runner included, at most 3 MB.
	m["jail-pss/3MB"] = m["jail-pss-KB"] / 3072
	m["jail-rss-KB"] = float64(rss) / float64(jails)
	return m, nil
}

func childPIDs(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

func descendantPIDs(pid int) []int {
	var out []int
	for _, c := range childPIDs(pid) {
		out = append(out, c)
		out = append(out, descendantPIDs(c)...)
	}
	return out
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// statusKB reads a "Key: N kB" line of /proc/<pid>/status.
func statusKB(pid int, key string) int64 { return kbLine(fmt.Sprintf("/proc/%d/status", pid), key) }

// rollupKB reads a line of /proc/<pid>/smaps_rollup.
func rollupKB(pid int, key string) int64 {
	return kbLine(fmt.Sprintf("/proc/%d/smaps_rollup", pid), key)
}

func kbLine(path, key string) int64 {
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

func sdkCall(name string, args map[string]any) *sdk.CallToolParams {
	return &sdk.CallToolParams{Name: name, Arguments: args}
}

func textOfMaybe(res *sdk.CallToolResult) string {
	if res == nil {
		return ""
	}
	return textOf(res)
}
