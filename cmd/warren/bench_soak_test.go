package main

import (
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkSoak is the load the reliability issue was measured with: 40
// workers (one user and session each, eight users sharing the task board)
// call a mix of tools — shell_exec, write_file, read_file, task_update
// and usage_record — as fast as they can on one 'serve http' for
// WARREN_SOAK_SECONDS (default 30). It reports calls/s, p50 and p99 per
// call, errors, and the server's RSS at start and at the end.
// Run: go test -run '^$' -bench Soak -benchtime 1x ./cmd/warren/
func BenchmarkSoak(b *testing.B) {
	needJail(b)
	const workers = 40
	secs := 30
	if s, err := strconv.Atoi(os.Getenv("WARREN_SOAK_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	data := jailDir(b)
	ws := jailDir(b)
	tokens := make([]string, workers)
	for i := range tokens {
		tokens[i] = createToken(b, data, fmt.Sprintf("soak%d", i))
	}
	warren(b, "task", "add", "--data-dir", data, "--workspace", ws, "Soak target")
	srv := serveHTTP(b, "--data-dir", data, "--workspace", ws, "--max-conns-per-client", "256")
	pid := srv.cmd.Process.Pid
	transport := &http.Transport{MaxIdleConnsPerHost: workers}
	body := func(id int, name, args string) []byte {
		return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args))
	}
	calls := [][]byte{
		body(2, "shell_exec", `{"command":"echo hi"}`),
		body(3, "write_file", `{"path":"soak.txt","content":"`+strings.Repeat("x", 4096)+`"}`),
		body(4, "read_file", `{"path":"soak.txt"}`),
		body(5, "task_update", `{"task_id":"T-1","note":"soak"}`),
		body(6, "usage_record", `{"model":"gpt-4o","input_tokens":10,"output_tokens":5}`),
	}
	cs := make([]*leanClient, workers)
	for i := range cs {
		c := &leanClient{url: srv.url, token: tokens[i], http: &http.Client{Transport: transport}}
		_, h, err := c.post([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"soak","version":"1"}}}`))
		if err != nil {
			b.Fatal(err)
		}
		c.session = h.Get("Mcp-Session-Id")
		if _, _, err := c.post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
			b.Fatal(err)
		}
		if _, _, err := c.post(calls[1]); err != nil { // start the jail, make soak.txt
			b.Fatal(err)
		}
		cs[i] = c
	}
	rssStart := float64(statusKB(pid, "VmRSS")) / 1024
	b.ResetTimer()
	var mu sync.Mutex
	var lat []time.Duration
	var errs int
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			var mine []time.Duration
			bad := 0
			for n := i; time.Now().Before(deadline); n++ {
				t0 := time.Now()
				out, _, err := c.post(calls[n%len(calls)])
				mine = append(mine, time.Since(t0))
				if err != nil || strings.Contains(string(out), `"isError":true`) {
					bad++
				}
			}
			mu.Lock()
			lat, errs = append(lat, mine...), errs+bad
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(float64(errs), "errors")
	b.ReportMetric(rssStart, "rss-start-MB")
	b.ReportMetric(float64(statusKB(pid, "VmRSS"))/1024, "rss-end-MB")
}
