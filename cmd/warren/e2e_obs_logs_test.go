package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/warrenhq/warren/sessions"
)

// TestRequestLogsCarryUserSessionAndTrace: with tracing on, the log line
// of a tool call names the user, the session and the trace id the client
// sent in _meta; at info level, the server's stderr holds neither the
// command's output nor the secret in its command.
func TestRequestLogsCarryUserSessionAndTrace(t *testing.T) {
	needJail(t)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer collector.Close()
	const secret = "s3cr3t-Tok3n-value"
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	for _, level := range []string{"debug", "info"} {
		var stderr lockedBuffer
		cmd := exec.Command(warrenBin, "serve", "stdio", "--data-dir", jailDir(t), "--log-level", level)
		cmd.Env = append(cmd.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL)
		cmd.Stderr = &stderr
		c := connect(t, &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := c.cs.CallTool(ctx, &sdk.CallToolParams{
			Name:      "shell_exec",
			Arguments: map[string]any{"command": "echo " + secret + "-printed"},
			Meta:      sdk.Meta{"traceparent": "00-" + traceID + "-b7ad6b7169203331-01"},
		})
		cancel()
		if err != nil || res.IsError {
			t.Fatalf("shell_exec: %v %s", err, textOf(res))
		}
		session, _ := structured(t, res)["session_id"].(string)
		c.cs.Close()
		cmd.Wait()

		logs := stderr.String()
		if strings.Contains(logs, secret) {
			t.Errorf("--log-level %s: the server's log holds the command or its output:\n%s", level, logs)
		}
		if level != "debug" {
			continue
		}
		var found bool
		sc := bufio.NewScanner(strings.NewReader(logs))
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) != nil || line["message"] != "tool call" {
				continue
			}
			found = true
			if line["user"] != sessions.LocalUser() || line["session"] != session || line["trace_id"] != traceID {
				t.Errorf("tool call log line %v: want user %s, session %s, trace_id %s", line, sessions.LocalUser(), session, traceID)
			}
		}
		if !found {
			t.Errorf("no 'tool call' line at debug level:\n%s", logs)
		}
	}
}

// TestStdioServesMetricsOnItsOwnAddress: 'serve stdio --metrics-addr'
// serves /metrics (no token) and /readyz beside JSON-RPC on stdin/stdout.
func TestStdioServesMetricsOnItsOwnAddress(t *testing.T) {
	needJail(t)
	cmd := exec.Command(warrenBin, "serve", "stdio", "--data-dir", jailDir(t), "--metrics-addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	lg := newTestLog(t, "server: ")
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct{ URL, Message string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "serving metrics" {
				urls <- line.URL
			}
			lg.Write(append(sc.Bytes(), '\n'))
		}
	}()
	c := connect(t, &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second})
	var url string
	select {
	case url = <-urls:
	case <-time.After(30 * time.Second):
		t.Fatal("no 'serving metrics' log line")
	}
	c.exec("echo hi")
	fams := scrape(t, url[:len(url)-len("/metrics")], "")
	if v := value(fams, "warren_mcp_tool_calls_total", "tool", "shell_exec", "outcome", "ok"); v != 1 {
		t.Errorf("shell_exec ok calls %v, want 1", v)
	}
	resp, err := http.Get(strings.Replace(url, "/metrics", "/readyz", 1))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz on the metrics address: %d", resp.StatusCode)
	}
}
