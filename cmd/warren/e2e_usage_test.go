package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reportRows returns usage_report rows keyed by their group.
func reportRows(t testing.TB, rep map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, r := range rep["rows"].([]any) {
		row := r.(map[string]any)
		out[row["key"].(string)] = row
	}
	return out
}

// A client reports its tokens while holding a claim; the server meters
// every tool result. Both show up in usage_report under the right session,
// task and client, and the CSV forms parse back.
func TestUsageRecordAndReportOverMCP(t *testing.T) {
	data := t.TempDir()
	agent := serveStdio(t, "--data-dir", data)

	agent.ok("task_add", map[string]any{"title": "Meter me"})
	claim := agent.ok("task_claim", map[string]any{"task_id": "T-1"})
	session := claim["task"].(map[string]any)["claim"].(map[string]any)["session_id"].(string)
	rec := agent.ok("usage_record", map[string]any{"model": "gpt-4o", "input_tokens": 1000, "output_tokens": 200, "cached_tokens": 400})
	if rec["session_id"] != session || rec["task_id"] != "T-1" || rec["client"] != "warren-e2e" || rec["priced"] != true {
		t.Fatalf("usage_record: %v", rec)
	}
	agent.ok("usage_record", map[string]any{"model": "my-local-llm", "input_tokens": 5, "output_tokens": 5, "client": "my-agent"})
	agent.ok("task_list", map[string]any{})

	byTask := reportRows(t, agent.ok("usage_report", map[string]any{"group_by": "task"}))
	row := byTask["T-1"]
	if row == nil || row["input_tokens"] != 1005.0 || row["output_tokens"] != 205.0 || row["cached_tokens"] != 400.0 {
		t.Fatalf("usage by task: %v", byTask)
	}
	// gpt-4o: 1000 × $2.50 + 200 × $10 + 400 × $1.25 per million tokens.
	if row["cost_micros"] != 5000.0 || row["unpriced_records"] != 1.0 {
		t.Fatalf("cost of T-1: %v", row)
	}
	// The server's own records of its tool results: task_claim onwards.
	if row["tool_output_bytes"].(float64) <= 0 || row["tool_output_tokens"].(float64) <= 0 {
		t.Fatalf("no tool-output records for T-1: %v", row)
	}
	byKind := reportRows(t, agent.ok("usage_report", map[string]any{"group_by": "kind"}))
	// task_add, task_claim, 2× usage_record, task_list and the report before this one.
	if byKind["tool_output"]["records"] != 6.0 || byKind["model"]["records"] != 2.0 {
		t.Fatalf("records by kind: %v", byKind)
	}
	byClient := reportRows(t, agent.ok("usage_report", map[string]any{"group_by": "client"}))
	if byClient["warren-e2e"]["input_tokens"] != 1000.0 || byClient["my-agent"]["input_tokens"] != 5.0 {
		t.Fatalf("records by client: %v", byClient)
	}
	bySession := reportRows(t, agent.ok("usage_report", map[string]any{"group_by": "session"}))
	// task_add ran before any session existed: metering must not create
	// one to bill it, so its record has no session.
	if len(bySession) != 2 || bySession[session] == nil || bySession["(no session)"]["records"] != 1.0 || bySession["(no session)"]["none"] != true {
		t.Fatalf("records by session: %v", bySession)
	}

	res := agent.call("usage_report", map[string]any{"group_by": "session", "format": "csv"})
	out := structured(t, res)
	rows, err := csv.NewReader(strings.NewReader(out["csv"].(string))).ReadAll()
	if err != nil || textOf(res) != out["csv"] {
		t.Fatalf("csv: %v\n%s", err, out["csv"])
	}
	var sessionRow []string
	for _, r := range rows[1:] {
		if r[0] == session {
			sessionRow = r
		}
	}
	if len(rows) != 3 || rows[0][0] != "session" || sessionRow == nil || sessionRow[2] != "1005" || sessionRow[7] != "0.005000" {
		t.Fatalf("csv rows: %q", rows)
	}

	agent.fails("usage_report", map[string]any{"group_by": "colour"}, "group by must be one of session, task, client, model, day, user, kind")
	agent.fails("usage_report", map[string]any{"group_by": "day", "since": "last week"}, "use an RFC 3339 time")
	agent.fails("usage_report", map[string]any{"group_by": "day", "format": "xml"}, "use json or csv")
	agent.fails("usage_record", map[string]any{"model": "", "input_tokens": 1, "output_tokens": 1}, "model is empty")
	agent.fails("usage_record", map[string]any{"model": "x", "input_tokens": -1, "output_tokens": 1}, "must not be negative")

	// The CLI reads the same records while the server runs.
	cli := warren(t, "usage", "report", "--data-dir", data, "--group-by", "task", "--format", "csv")
	rows, err = csv.NewReader(strings.NewReader(cli)).ReadAll()
	if err != nil || rows[0][0] != "task" || rows[len(rows)-1][0] != "T-1" || rows[len(rows)-1][2] != "1005" {
		t.Fatalf("warren usage report --format csv: %v %q", err, rows)
	}
	export := filepath.Join(t.TempDir(), "usage.csv")
	warren(t, "usage", "export", "--data-dir", data, "--group-by", "model", "-o", export)
	if b, _ := os.ReadFile(export); !strings.HasPrefix(string(b), "model,records,") || !strings.Contains(string(b), "\ngpt-4o,1,1000,200,400,") {
		t.Fatalf("export:\n%s", b)
	}
	if table := warren(t, "usage", "report", "--data-dir", data, "--group-by", "model"); !strings.Contains(table, "my-local-llm") ||
		!strings.Contains(table, "without a price") {
		t.Fatalf("report table:\n%s", table)
	}
}

// An enforced threshold on a session's tool output stops shell_exec in
// that session, with a message naming the threshold; the alert is listed.
func TestEnforcedThresholdStopsShellExec(t *testing.T) {
	needJail(t)
	data, ws := jailDir(t), jailDir(t)
	cfg := `{"metering": {"thresholds": [{"name": "shell-budget", "scope": "session", "metric": "tool_output_bytes",
		"period": "day", "limit": 20000, "enforce": true}]}}`
	if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := serveStdio(t, "--data-dir", data, "--workspace", ws)
	agent.exec("echo small")
	big := agent.exec("head -c 30000 /dev/zero | tr '\\0' a")
	if len(big["stdout"].(string)) != 30000 {
		t.Fatalf("big output: %d bytes", len(big["stdout"].(string)))
	}
	agent.fails("shell_exec", map[string]any{"command": "echo again"}, `shell_exec refused: session s-`)
	agent.fails("shell_exec", map[string]any{"command": "echo again"}, `reached usage threshold "shell-budget"`)
	// The threshold stops commands, not the other tools.
	agent.ok("write_file", map[string]any{"path": "note.txt", "content": "still here\n"})
	if got := agent.ok("read_file", map[string]any{"path": "note.txt"}); got["content"] != "still here\n" {
		t.Fatalf("read_file: %v", got)
	}
	if out := warren(t, "usage", "alerts", "--data-dir", data); !strings.Contains(out, "shell-budget") || !strings.Contains(out, "true") {
		t.Fatalf("warren usage alerts:\n%s", out)
	}
}

// The CLI's `session exec` runs commands through the same manager as
// shell_exec: a session an enforced threshold stopped refuses them there
// too, with the threshold's name, and runs nothing.
func TestEnforcedThresholdStopsSessionExec(t *testing.T) {
	needJail(t)
	data, ws := jailDir(t), jailDir(t)
	cfg := `{"metering": {"thresholds": [{"name": "shell-budget", "scope": "session", "metric": "tool_output_bytes",
		"period": "day", "limit": 20000, "enforce": true}]}}`
	if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := serveStdio(t, "--data-dir", data, "--workspace", ws)
	big := agent.exec("head -c 30000 /dev/zero | tr '\\0' a")
	id := big["session_id"].(string)
	agent.fails("shell_exec", map[string]any{"command": "echo again"}, `reached usage threshold "shell-budget"`)
	out := warrenFails(t, "session", "exec", "--data-dir", data, id, "--", "touch /workspace/ran")
	if !strings.Contains(out, `reached usage threshold "shell-budget"`) {
		t.Fatalf("warren session exec in a stopped session said:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Fatal("warren session exec ran the command in a session an enforced threshold stopped")
	}
}
