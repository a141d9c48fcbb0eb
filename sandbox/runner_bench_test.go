package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox/runner/proto"
	"github.com/warrenhq/warren/sandbox/runner/runnertest"
)

// BenchmarkRunnerRoundTrip is the jail's runner as read_file and the
// other file tools reach it: a ping and a 4 KB read, each a round trip
// between this process and the runner in a real jail, p50 over b.N calls.
func BenchmarkRunnerRoundTrip(b *testing.B) {
	sh, dir := newTestShell(b)
	if err := os.WriteFile(filepath.Join(dir, "4k.txt"), []byte(strings.Repeat("abcdefghijklmno\n", 256)), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	c, err := sh.Runner(ctx)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 8<<10)
	ping := func() time.Duration {
		t0 := time.Now()
		if err := c.Call(ctx, proto.OpPing, proto.PingArgs{}, nil, nil); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	read := func() time.Duration {
		t0 := time.Now()
		if n, res := runnertest.ReadFile(b, c, "4k.txt", buf); n != 4096 || res.Size != 4096 {
			b.Fatal(n, res)
		}
		return time.Since(t0)
	}
	for range 50 {
		ping()
		read()
	}
	var pings, reads []time.Duration
	b.ResetTimer()
	for range b.N {
		pings = append(pings, ping())
		reads = append(reads, read())
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(us(p50(pings)), "ping-p50-µs")
	b.ReportMetric(us(p50(reads)), "read4k-p50-µs")
}
