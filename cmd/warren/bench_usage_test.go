package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkUsageLossOnKill measures what a crash costs the usage records of
// tool output, which are written in batches: 8 users call shell_exec as
// fast as they can on one 'serve http' for two seconds, the server is
// killed with SIGKILL, and the records in the database are counted against
// the calls that were answered. It reports the calls lost and the loss
// window: how long before the kill the oldest lost call was answered
// (assuming, as batching implies, that the lost calls are the newest).
// Run: go test -run '^$' -bench UsageLossOnKill -benchtime 1x ./cmd/warren/
func BenchmarkUsageLossOnKill(b *testing.B) {
	needJail(b)
	const users = 8
	var lost, windowMS []float64
	for range b.N {
		data := jailDir(b)
		tokens := make([]string, users)
		for i := range tokens {
			tokens[i] = createToken(b, data, fmt.Sprintf("u%d", i))
		}
		srv := serveHTTP(b, "--data-dir", data)
		var mu sync.Mutex
		var answered []time.Time
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for i := range users {
			c := connectHTTP(b, srv, tokens[i])
			c.ok("shell_exec", map[string]any{"command": "true"})
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					res, err := c.cs.CallTool(ctx, &sdk.CallToolParams{Name: "shell_exec", Arguments: map[string]any{"command": "echo hi"}})
					cancel()
					if err != nil || res == nil {
						return
					}
					mu.Lock()
					answered = append(answered, time.Now())
					mu.Unlock()
				}
			})
		}
		time.Sleep(2 * time.Second)
		killed := time.Now()
		if err := srv.cmd.Process.Kill(); err != nil {
			b.Fatal(err)
		}
		_ = srv.cmd.Wait()
		close(stop)
		wg.Wait()
		db, err := openDB(context.Background(), data)
		if err != nil {
			b.Fatal(err)
		}
		var recorded int
		err = db.QueryRow(`SELECT count(*) FROM usage_records WHERE kind = 'tool_output' AND tool = 'shell_exec'`).Scan(&recorded)
		db.Close()
		if err != nil {
			b.Fatal(err)
		}
		// The warm-up calls are recorded too; they are not in answered.
		n := len(answered) - (recorded - users)
		sort.Slice(answered, func(i, j int) bool { return answered[i].Before(answered[j]) })
		w := 0.0
		if n > 0 {
			w = float64(killed.Sub(answered[len(answered)-n])) / float64(time.Millisecond)
		}
		lost = append(lost, float64(max(n, 0)))
		windowMS = append(windowMS, w)
	}
	sort.Float64s(lost)
	sort.Float64s(windowMS)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(lost[len(lost)-1], "max-calls-lost")
	b.ReportMetric(windowMS[len(windowMS)-1], "max-loss-window-ms")
}
