package main

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads /metrics of srv with token and returns its families.
func scrape(t *testing.T, base, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, body)
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("lint /metrics: %v", err)
	}
	for _, p := range problems {
		t.Errorf("/metrics lint: %s: %s", p.Metric, p.Text)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value is the value of the series of name whose labels include want
// (counter, gauge or a histogram's count), 0 when absent.
func value(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(want); i += 2 {
			if have[want[i]] != want[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// TestMetricsMoveWithRealToolCalls scrapes /metrics around real tool
// calls in real jails: each counter and histogram moves by exactly what
// the calls did, an OOM-killed command and a timeout are counted, the
// exposition passes promlint, and /metrics wants the same token as /mcp.
func TestMetricsMoveWithRealToolCalls(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	token := createToken(t, data, "alice")
	srv := serveHTTP(t, "--data-dir", data, "--memory-per-user", "128M")
	base := strings.TrimSuffix(srv.url, "/mcp")

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics without a token: %d, want 401", resp.StatusCode)
	}

	c := connectHTTP(t, srv, token)
	before := scrape(t, base, token)
	c.exec("echo hi")
	c.exec("echo again")
	c.fails("read_file", map[string]any{"path": "missing.txt"}, "missing.txt")
	timedOut := c.exec("sleep 30", "timeout_ms", 300)
	oom := c.exec("python3 -c 'b = bytearray(512 << 20); print(len(b))'")
	after := scrape(t, base, token)

	if timedOut["timed_out"] != true {
		t.Fatalf("sleep 30 with timeout_ms 300: %v", timedOut)
	}
	if oom["exit_code"] != float64(137) {
		t.Fatalf("memory hog: %v, want exit 137 (OOM-killed)", oom)
	}
	moved := func(name string, want float64, labels ...string) {
		t.Helper()
		if d := value(after, name, labels...) - value(before, name, labels...); d != want {
			t.Errorf("%s%v moved by %v, want %v", name, labels, d, want)
		}
	}
	moved("warren_mcp_tool_calls_total", 4, "tool", "shell_exec", "outcome", "ok")
	moved("warren_mcp_tool_calls_total", 1, "tool", "read_file", "outcome", "tool_error")
	moved("warren_mcp_tool_calls_total", 0, "tool", "shell_exec", "outcome", "protocol_error")
	moved("warren_mcp_tool_call_duration_seconds", 4, "tool", "shell_exec")
	moved("warren_mcp_tool_call_duration_seconds", 1, "tool", "read_file")
	moved("warren_sandbox_jail_starts_total", 1, "result", "ok")
	moved("warren_sandbox_commands_total", 3, "end", "completed")
	moved("warren_sandbox_commands_total", 1, "end", "timed_out")
	moved("warren_sandbox_oom_kills_total", 1)
	moved("warren_sandbox_shell_restarts_total", 0)
	moved("warren_sandbox_command_duration_seconds", 4)
	// Five tool calls and the first scrape, at least (the client may send
	// notifications too).
	if d := value(after, "warren_http_requests_total", "code", "200") - value(before, "warren_http_requests_total", "code", "200"); d < 6 {
		t.Errorf("HTTP 200 answers moved by %v, want at least 6", d)
	}
	if d := value(after, "warren_mcp_tool_output_bytes_total", "tool", "shell_exec") -
		value(before, "warren_mcp_tool_output_bytes_total", "tool", "shell_exec"); d < float64(len("hi\nagain\n")) {
		t.Errorf("shell_exec output bytes moved by %v, want at least the output", d)
	}
	if v := value(after, "warren_sandbox_jails_live"); v != 1 {
		t.Errorf("live jails %v, want 1", v)
	}
	if v := value(after, "warren_sessions", "state", "active"); v != 1 {
		t.Errorf("active sessions %v, want 1", v)
	}
	if v := value(before, "warren_http_requests_total", "code", "401"); v != 1 {
		t.Errorf("401 answers before the calls %v, want 1 (the scrape without a token)", v)
	}
}

// TestReadyzFailsWhenTheDatabaseIsNotWritable: while another process
// holds SQLite's write lock past the check's deadline, /readyz answers
// 503 and names the database; once it lets go, 200. No token is needed,
// like /healthz.
func TestReadyzFailsWhenTheDatabaseIsNotWritable(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	srv := serveHTTP(t, "--data-dir", data, "--auth", "none")
	base := strings.TrimSuffix(srv.url, "/mcp")
	ready := func() (int, string) {
		t.Helper()
		time.Sleep(1100 * time.Millisecond) // past the result the server reuses for a second
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := ready(); code != http.StatusOK {
		t.Fatalf("/readyz of a fresh server: %d %s", code, body)
	}

	db, err := openDB(t.Context(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	code, body := ready()
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "fail database writable") {
		t.Fatalf("/readyz while the database is locked: %d %q, want 503 naming the database", code, body)
	}
	if code, body := ready(); code != http.StatusOK {
		t.Fatalf("/readyz after the lock is gone: %d %s", code, body)
	}
}
