package main

// BenchmarkReplicas: 'serve http' replicas on one PostgreSQL (started by
// sessions/sqltest) and one data directory, on this machine. Run:
//   just bench-replicas   (go test -run '^$' -bench Replicas -benchtime 1x ./cmd/warren/)
// The scenario runs once per process; it reports:
//   - one-calls/s, two-calls/s: shell_exec calls per second of 8 clients,
//     each in its own session, all on one replica, then split over two
//     (each client sticks to its replica, as behind a balancer with
//     session affinity);
//   - alternate-p50-ms: a shell_exec whose session's jail is on the other
//     replica (every call of the client goes to the other one: the
//     handover, the jail's restart and the command);
//   - takeover-ms: after kill -9 of the replica that drives a session, how
//     long the first call through the other one takes (the lease's expiry,
//     default --lease-ttl 5s, then a jail started from the saved state).

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/sessions/sqlschema/sqltest"
)

type replicasBench struct {
	once    sync.Once
	metrics map[string]float64
}

var benchReplicas replicasBench

func BenchmarkReplicas(b *testing.B) {
	needJail(b)
	benchReplicas.once.Do(func() { benchReplicas.metrics = runReplicasBench(b) })
	b.ReportMetric(0, "ns/op")
	for _, k := range []string{"one-calls/s", "two-calls/s", "alternate-p50-ms", "takeover-ms"} {
		b.ReportMetric(benchReplicas.metrics[k], k)
	}
}

func runReplicasBench(b *testing.B) map[string]float64 {
	data := jailDir(b)
	db := sqltest.Shared(b).Fresh(b)
	tok := strings.TrimSpace(warren(b, "token", "create", "--user", "alice", "--data-dir", data, "--database", db))
	replica := func(id string) *httpServer {
		return serveHTTP(b, "--data-dir", data, "--database", db, "--replica-id", id, "--max-conns-per-user", "0",
			"--max-shells-per-user", "0", "--memory-per-user", "0", "--cpus-per-user", "0")
	}
	a, r2 := replica("bench-a"), replica("bench-b")
	dial := func(srv *httpServer) *client {
		return connect(b, &sdk.StreamableClientTransport{Endpoint: srv.url, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: bearer{tok, http.DefaultTransport}}})
	}
	const clients, calls = 8, 60
	rate := func(servers ...*httpServer) float64 {
		cs := make([]*client, clients)
		ids := make([]string, clients)
		for i := range cs {
			cs[i] = dial(servers[i%len(servers)])
			ids[i] = cs[i].ok("session_create", map[string]any{})["session_id"].(string)
			cs[i].exec("true", "session_id", ids[i]) // its jail runs
		}
		var wg sync.WaitGroup
		start := time.Now()
		for i := range cs {
			wg.Go(func() {
				for range calls {
					cs[i].exec("echo hello", "session_id", ids[i])
				}
			})
		}
		wg.Wait()
		return float64(clients*calls) / time.Since(start).Seconds()
	}
	m := map[string]float64{}
	m["one-calls/s"] = rate(a)
	m["two-calls/s"] = rate(a, r2)

	ca, cb := dial(a), dial(r2)
	id := ca.ok("session_create", map[string]any{})["session_id"].(string)
	var alt []time.Duration
	for i := range 20 {
		c := ca
		if i%2 == 1 {
			c = cb
		}
		start := time.Now()
		if out := c.exec(fmt.Sprintf("export N=%d", i), "session_id", id); out["exit_code"] != 0.0 {
			b.Fatalf("alternating call %d: %v", i, out)
		}
		alt = append(alt, time.Since(start))
	}
	m["alternate-p50-ms"] = percentile(alt[1:], 0.5)

	ca.exec("cd /tmp", "session_id", id) // A drives the jail
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if out := cb.exec("pwd", "session_id", id); out["stdout"] != "/tmp\n" {
		b.Fatalf("after the takeover: %v", out)
	}
	m["takeover-ms"] = float64(time.Since(start)) / float64(time.Millisecond)
	return m
}
