package main

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// idleRSSTarget is the most an idle 'serve stdio' may hold, in MB: what a
// user who keeps a server per project open in an IDE pays for each.
const idleRSSTarget = 35

// BenchmarkIdleRSS starts 'serve stdio' as a client does (initialize,
// tools/list), lets it idle for 6 s (long enough for trimWhenIdle to see
// it idle), and reads its VmRSS; the median of 3 servers.
// Reported: idle-rss-MB, idle-anon-MB (the process's own memory: heap,
// stacks; the rest is the binary's pages it touched, shared with every
// other warren) and idle-rss/35MB, the ratio bench-check holds to 1.
func BenchmarkIdleRSS(b *testing.B) {
	needJail(b)
	var rss, anon []float64
	for range 3 {
		cmd := exec.Command(warrenBin, "serve", "stdio", "--data-dir", jailDir(b), "--workspace", b.TempDir())
		c := connect(b, &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, err := c.cs.ListTools(ctx, nil); err != nil {
			b.Fatalf("tools/list: %v", err)
		}
		cancel()
		time.Sleep(6 * time.Second) // idle: long enough for trimWhenIdle to see two quiet checks
		pid := cmd.Process.Pid
		rss = append(rss, float64(statusKB(pid, "VmRSS"))/1024)
		anon = append(anon, float64(rollupKB(pid, "Anonymous"))/1024)
		c.cs.Close()
		_ = cmd.Wait()
	}
	slices.Sort(rss)
	slices.Sort(anon)
	b.ReportMetric(rss[len(rss)/2], "idle-rss-MB")
	b.ReportMetric(anon[len(anon)/2], "idle-anon-MB")
	b.ReportMetric(rss[len(rss)/2]/idleRSSTarget, "idle-rss/35MB")
}
