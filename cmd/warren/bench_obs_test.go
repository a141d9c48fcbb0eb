package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkObsOverhead measures what observability costs a call:
// shell_exec echo hi p50 on a server with tracing on (every span exported
// over OTLP/HTTP to a local collector stand-in) and metrics served on
// --metrics-addr, against the same server with both off, interleaved in
// one run. Metrics are counted in both (an atomic add each); "off" has no
// tracing hooks at all. Reported as obs-overhead (on/off; target ≤ 1.03
// in cmd/benchcheck) and as added-µs (on − off). BenchmarkTracedCall
// isolates the part on the call's path.
func BenchmarkObsOverhead(b *testing.B) {
	needJail(b)
	var spans atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		spans.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()

	off := serveStdio(b, "--data-dir", jailDir(b))
	onCmd := exec.Command(warrenBin, "serve", "stdio", "--data-dir", jailDir(b), "--metrics-addr", "127.0.0.1:0")
	onCmd.Env = append(onCmd.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL, "OTEL_BSP_SCHEDULE_DELAY=1000")
	onCmd.Stderr = newTestLog(b, "server (on): ")
	on := connect(b, &sdk.CommandTransport{Command: onCmd, TerminateDuration: 3 * time.Second})

	args := map[string]any{"command": "echo hi"}
	for range 20 {
		mustCall(b, off, "shell_exec", args)
		mustCall(b, on, "shell_exec", args)
	}
	var gotOn, gotOff timed
	b.ResetTimer()
	for i := range b.N {
		// Alternate which goes first, so that neither always runs on a
		// cache the other warmed.
		if i%2 == 0 {
			gotOff = append(gotOff, mustCall(b, off, "shell_exec", args))
			gotOn = append(gotOn, mustCall(b, on, "shell_exec", args))
		} else {
			gotOn = append(gotOn, mustCall(b, on, "shell_exec", args))
			gotOff = append(gotOff, mustCall(b, off, "shell_exec", args))
		}
	}
	b.StopTimer()
	time.Sleep(1500 * time.Millisecond) // one more export batch
	if spans.Load() == 0 {
		b.Fatal("the traced server exported no spans: the comparison would measure nothing")
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(us(gotOn.p50()), "on-p50-µs")
	b.ReportMetric(us(gotOff.p50()), "off-p50-µs")
	b.ReportMetric(float64(gotOn.p50())/float64(gotOff.p50()), "obs-overhead")
	// The cost in time, which stays when the call itself gets faster.
	b.ReportMetric(us(gotOn.p50()-gotOff.p50()), "added-µs")
}
