package main

// Replicas of 'warren serve http' on one PostgreSQL and one data
// directory: a client's calls reach either, as behind a load balancer.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/sessions/sqlschema/sqltest"
)

// replicaTTL keeps the tests short: a dead replica's leases expire after it.
const replicaTTL = "2s"

// startReplica starts one replica named id on the shared data directory
// and database.
func startReplica(t *testing.T, data, db, id string) *httpServer {
	t.Helper()
	return serveHTTP(t, "--data-dir", data, "--database", db, "--replica-id", id, "--lease-ttl", replicaTTL)
}

// tool calls a tool through the raw client (MCP session of the 2025-06-18
// revision) at its current url; it returns the structured result, or the
// error text.
func (c *rawMCP) tool(name string, args map[string]any) (map[string]any, string) {
	c.t.Helper()
	resp := c.do("POST", c.request("tools/call", map[string]any{"name": name, "arguments": args}))
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.t.Fatalf("%s on %s: HTTP %d %s", name, c.url, resp.StatusCode, b)
	}
	m := sse(c.t, resp, nil)
	res, _ := m["result"].(map[string]any)
	if res == nil {
		c.t.Fatalf("%s on %s: %v", name, c.url, m)
	}
	if res["isError"] == true {
		b, _ := json.Marshal(res["content"])
		return nil, string(b)
	}
	out, _ := res["structuredContent"].(map[string]any)
	return out, ""
}

// must is tool that fails the test on a tool error.
func (c *rawMCP) must(name string, args map[string]any) map[string]any {
	c.t.Helper()
	out, msg := c.tool(name, args)
	if msg != "" {
		c.t.Fatalf("%s %v on %s: %s", name, args, c.url, msg)
	}
	return out
}

// metricsOf reads srv's /metrics with token.
func metricsOf(t *testing.T, srv *httpServer, token string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", strings.TrimSuffix(srv.url, "/mcp")+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// One MCP session of the 2025 revisions whose calls alternate between two
// replicas: the session made on A is used on B (cwd, exports, a file),
// read on A, its claim made on B is listed on A, and each replica names
// itself in /metrics.
func TestReplicasServeOneClientAlternately(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	db := sqltest.Shared(t).Fresh(t)
	tok := strings.TrimSpace(warren(t, "token", "create", "--user", "alice", "--data-dir", data, "--database", db))
	warren(t, "task", "add", "--data-dir", data, "--database", db, "Ship it")
	a, b := startReplica(t, data, db, "replica-a"), startReplica(t, data, db, "replica-b")

	c := &rawMCP{t: t, url: a.url, token: tok}
	c.initialize() // on A: B has never seen this MCP session
	id, _ := c.must("session_create", map[string]any{"name": "shared"})["session_id"].(string)
	if id == "" {
		t.Fatal("session_create returned no id")
	}
	c.url = b.url
	out := c.must("shell_exec", map[string]any{"session_id": id,
		"command": "cd /tmp && export REPLICA=b && echo written-on-b > /workspace/f.txt && echo ok"})
	if out["stdout"] != "ok\n" {
		t.Fatalf("shell_exec on B: %v", out)
	}
	c.url = a.url
	if got := c.must("read_file", map[string]any{"session_id": id, "path": "f.txt"}); !strings.Contains(fmt.Sprint(got["content"]), "written-on-b") {
		t.Fatalf("read_file on A of the file written on B: %v", got)
	}
	c.url = b.url
	if out := c.must("shell_exec", map[string]any{"session_id": id, "command": "pwd; echo $REPLICA"}); out["stdout"] != "/tmp\nb\n" {
		t.Fatalf("cwd and exports back on B after A drove the jail: %v", out)
	}
	c.must("task_claim", map[string]any{"task_id": "T-1", "session_id": id})
	c.url = a.url
	if list := fmt.Sprint(c.must("task_list", map[string]any{})); !strings.Contains(list, id) {
		t.Fatalf("task_list on A lacks B's claim by %s: %s", id, list)
	}
	if out := c.must("shell_exec", map[string]any{"session_id": id, "command": "pwd; echo $REPLICA; cat /workspace/f.txt"}); out["stdout"] != "/tmp\nb\nwritten-on-b\n" {
		t.Fatalf("the session on A: %v", out)
	}
	if ls := fmt.Sprint(c.must("session_list", map[string]any{})); !strings.Contains(ls, id) {
		t.Fatalf("session_list on A: %s", ls)
	}
	// B knew the client's name though it never saw its initialize: every
	// call's usage record names it.
	if n, raw := pgCountWhere(t, db, "usage_records", "client = 'unknown'"), pgCountWhere(t, db, "usage_records", "client = 'raw'"); n != 0 || raw < 6 {
		t.Errorf("usage records: %d with client unknown, %d with the client's name", n, raw)
	}
	// The CLI beside the replicas takes its turn like a third replica,
	// with WARREN_REPLICA_ID of a replica in its environment.
	cmd := exec.Command(warrenBin, "session", "exec", "--data-dir", data, "--database", db, "--user", "alice", id, "--", "pwd; echo $REPLICA; export REPLICA=cli")
	cmd.Env = append(os.Environ(), "WARREN_REPLICA_ID=replica-a")
	if out, err := cmd.CombinedOutput(); err != nil || string(out) != "/tmp\nb\n" {
		t.Fatalf("warren session exec beside the replicas: %q %v", out, err)
	}
	if out := c.must("shell_exec", map[string]any{"session_id": id, "command": "echo $REPLICA"}); out["stdout"] != "cli\n" {
		t.Fatalf("A after the CLI: %v", out)
	}
	for name, srv := range map[string]*httpServer{"replica-a": a, "replica-b": b} {
		m := metricsOf(t, srv, tok)
		if !strings.Contains(m, `warren_replica_info{replica="`+name+`"} 1`) {
			t.Errorf("/metrics of %s does not name it:\n%.2000s", name, m)
		}
		// A drives the session's jail now (its last command), as both see.
		if !strings.Contains(m, `warren_session_leases{replica="replica-a"} 1`) || strings.Contains(m, `warren_session_leases{replica="replica-b"}`) {
			t.Errorf("/metrics of %s: live leases not A's one:\n%s", name, grepLines(m, "warren_session_lease"))
		}
	}
	// Ended on B, the MCP session is ended on A too.
	c.url = b.url
	if code, body := c.status("DELETE", ""); code != http.StatusOK {
		t.Fatalf("DELETE on B: %d %s", code, body)
	}
	c.url = a.url
	if code, _ := c.status("POST", c.request("ping", nil)); code != http.StatusNotFound {
		t.Fatalf("the MCP session ended on B answers %d on A, want 404", code)
	}
}

// alternate sends each request to the next of urls, as a round-robin
// load balancer would.
type alternate struct {
	urls  []*url.URL
	n     atomic.Int64
	token string
}

func (a *alternate) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	u := a.urls[int(a.n.Add(1))%len(a.urls)]
	r.URL.Scheme, r.URL.Host, r.Host = u.Scheme, u.Host, u.Host
	r.Header.Set("Authorization", "Bearer "+a.token)
	return http.DefaultTransport.RoundTrip(r)
}

// The sessionless 2026-07-28 revision (the Go SDK's default) across
// replicas as it is: every request to the other replica, one workspace
// session used throughout.
func TestReplicasServeTheSessionlessRevision(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	db := sqltest.Shared(t).Fresh(t)
	tok := strings.TrimSpace(warren(t, "token", "create", "--user", "alice", "--data-dir", data, "--database", db))
	a, b := startReplica(t, data, db, "replica-a"), startReplica(t, data, db, "replica-b")
	ua, _ := url.Parse(a.url)
	ub, _ := url.Parse(b.url)
	lb := &alternate{urls: []*url.URL{ua, ub}, token: tok}
	cs := goSDKClient(t, &sdk.StreamableClientTransport{Endpoint: a.url, HTTPClient: &http.Client{Transport: lb}, MaxRetries: -1}, nil, nil)
	c := &client{t: t, cs: cs, wire: &wire{}}
	id, _ := c.ok("session_create", map[string]any{})["session_id"].(string)
	for i := range 4 {
		out := c.exec(fmt.Sprintf("echo $N; export N=%d; echo line%d >> /workspace/log", i, i), "session_id", id)
		want := fmt.Sprint(i - 1)
		if i == 0 {
			want = ""
		}
		if out["stdout"] != want+"\n" {
			t.Fatalf("call %d: %v (want the export of the call before, made on the other replica)", i, out)
		}
	}
	if got := c.ok("read_file", map[string]any{"session_id": id, "path": "log"}); got["content"] != "line0\nline1\nline2\nline3\n" {
		t.Fatalf("read_file: %v", got)
	}
	if lb.n.Load() < 6 {
		t.Fatalf("only %d requests went through the balancer", lb.n.Load())
	}
}

// A replica killed with SIGKILL in the middle of a client's work: the
// other takes its session over, and everything acknowledged before the
// kill is there: usage records, task claims, lines written by commands,
// the last cwd and export.
func TestReplicaKilledMidLoadLosesNothingAcknowledged(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	db := sqltest.Shared(t).Fresh(t)
	tok := strings.TrimSpace(warren(t, "token", "create", "--user", "alice", "--data-dir", data, "--database", db))
	const tasks = 40
	for i := range tasks {
		warren(t, "task", "add", "--data-dir", data, "--database", db, fmt.Sprintf("Task %d", i+1))
	}
	a, b := startReplica(t, data, db, "replica-a"), startReplica(t, data, db, "replica-b")
	ca := &rawMCP{t: t, url: a.url, token: tok}
	ca.initialize()
	id, _ := ca.must("session_create", map[string]any{})["session_id"].(string)

	// Load on A from another goroutine; A dies after some acknowledgements.
	type acked struct {
		line, usage, claim int
		cwd                string
	}
	progress := make(chan acked, 1000)
	go func() {
		defer close(progress)
		for i := 1; i <= tasks; i++ {
			var ack acked
			r := &rawMCP{t: t, url: a.url, token: tok, session: ca.session, nextID: 1000 * i}
			if _, msg := r.toolQuiet("shell_exec", map[string]any{"session_id": id,
				"command": fmt.Sprintf("mkdir -p /workspace/d%d && cd /workspace/d%d && export LAST=%d && echo line%d >> /workspace/log", i, i, i, i)}); msg != "" {
				return
			}
			ack.line, ack.cwd = i, fmt.Sprintf("/workspace/d%d", i)
			if _, msg := r.toolQuiet("usage_record", map[string]any{"model": "gpt-4o", "input_tokens": i, "output_tokens": 1, "session_id": id}); msg != "" {
				progress <- ack
				return
			}
			ack.usage = i
			if _, msg := r.toolQuiet("task_claim", map[string]any{"task_id": fmt.Sprintf("T-%d", i), "session_id": id}); msg != "" {
				progress <- ack
				return
			}
			ack.claim = i
			progress <- ack
		}
	}()
	var last acked
	for ack := range progress {
		last = ack
		if ack.claim == 5 {
			if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	if last.line < 5 || last.line == tasks {
		t.Fatalf("the kill did not land mid-load: last acknowledged %+v", last)
	}
	t.Logf("acknowledged before the kill: %+v", last)

	cb := &rawMCP{t: t, url: b.url, token: tok, session: ca.session} // the same MCP session, on B
	start := time.Now()
	out := cb.must("shell_exec", map[string]any{"session_id": id, "command": "pwd; echo $LAST; cat /workspace/log"})
	t.Logf("takeover: the first call on B took %s", time.Since(start))
	lines := strings.Split(strings.TrimSpace(fmt.Sprint(out["stdout"])), "\n")
	// A command sent as A died may have run without its answer: the state
	// is the last acknowledged one or that one's.
	var lastRun int
	fmt.Sscan(lines[min(1, len(lines)-1)], &lastRun)
	if len(lines) < 2+last.line || lastRun < last.line || lastRun > last.line+1 || lines[0] != fmt.Sprintf("/workspace/d%d", lastRun) {
		t.Fatalf("after the takeover B's shell says %q; want cwd %s, LAST=%d and %d lines", out["stdout"], last.cwd, last.line, last.line)
	}
	for i := 1; i <= last.line; i++ {
		if lines[1+i] != fmt.Sprintf("line%d", i) {
			t.Fatalf("acknowledged line %d missing or out of order: %q", i, out["stdout"])
		}
	}
	var records, tokens int
	pg, err := sqltest.OpenURL(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if err := pg.QueryRow(`SELECT count(*), COALESCE(sum(input_tokens), 0) FROM usage_records WHERE kind = 'model'`).Scan(&records, &tokens); err != nil {
		t.Fatal(err)
	}
	if records < last.usage || tokens < last.usage*(last.usage+1)/2 {
		t.Fatalf("%d model usage records (%d tokens) after the kill, %d acknowledged", records, tokens, last.usage)
	}
	list := fmt.Sprint(cb.must("task_list", map[string]any{}))
	for i := 1; i <= last.claim; i++ {
		if n := pgCountWhere(t, db, "task_claims", fmt.Sprintf("num = %d AND holder_session = '%s'", i, id)); n != 1 {
			t.Fatalf("acknowledged claim of T-%d: %d rows; task_list: %s", i, n, list)
		}
	}
	// The session goes on on B.
	if out := cb.must("shell_exec", map[string]any{"session_id": id, "command": "echo after >> /workspace/log && wc -l < /workspace/log"}); strings.TrimSpace(fmt.Sprint(out["stdout"])) == "" {
		t.Fatalf("B after the takeover: %v", out)
	}
}

// toolQuiet is tool that returns transport failures (a killed server) as
// an error text instead of failing the test.
func (c *rawMCP) toolQuiet(name string, args map[string]any) (map[string]any, string) {
	body := c.request("tools/call", map[string]any{"name": name, "arguments": args})
	req, err := http.NewRequest("POST", c.url, strings.NewReader(body))
	if err != nil {
		return nil, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Mcp-Session-Id", c.session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err.Error()
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Sprintf("HTTP %d %v", resp.StatusCode, err)
	}
	var m map[string]any
	text := string(raw)
	if i := strings.LastIndex(text, "data: "); i >= 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		text = text[i+len("data: "):]
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(text)), &m); err != nil {
		return nil, "bad response: " + err.Error()
	}
	res, _ := m["result"].(map[string]any)
	if res == nil || res["isError"] == true {
		return nil, fmt.Sprint(m)
	}
	out, _ := res["structuredContent"].(map[string]any)
	return out, ""
}

// A replica frozen (SIGSTOP) past its lease, then woken: the replica that
// took the session over meanwhile keeps it. What the stale replica's jail
// did while it was frozen is not written as the session's state (the
// lease's epoch fences the write), and its next call takes the session
// back properly, with the newer state.
func TestStaleReplicaCannotWriteStateAfterTakeover(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	db := sqltest.Shared(t).Fresh(t)
	tok := strings.TrimSpace(warren(t, "token", "create", "--user", "alice", "--data-dir", data, "--database", db))
	a, b := startReplica(t, data, db, "replica-a"), startReplica(t, data, db, "replica-b")
	c := &rawMCP{t: t, url: a.url, token: tok}
	c.initialize()
	id, _ := c.must("session_create", map[string]any{})["session_id"].(string)
	c.must("shell_exec", map[string]any{"session_id": id, "command": "export X=first"})
	// A command on A that changes the state after A is frozen.
	if out := c.must("shell_exec", map[string]any{"session_id": id, "yield_ms": 200,
		"command": "sleep 3; export X=stale; cd /tmp"}); out["running"] != true {
		t.Fatalf("the slow command ended early: %v", out)
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	c.url = b.url
	if out := c.must("shell_exec", map[string]any{"session_id": id, "command": "echo $X; pwd; export X=fresh"}); out["stdout"] != "first\n/workspace\n" {
		t.Fatalf("B took over with %v, want the state saved before A froze", out)
	}
	// A's jail finishes the slow command while A is frozen; then A wakes.
	time.Sleep(3 * time.Second)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	c.url = a.url
	if out := c.must("shell_exec", map[string]any{"session_id": id, "command": "echo $X; pwd"}); out["stdout"] != "fresh\n/workspace\n" {
		t.Fatalf("A after waking: %v, want B's state (X=fresh in /workspace)", out)
	}
	pg, err := sqltest.OpenURL(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	var state string
	if err := pg.QueryRow(`SELECT shell_state FROM sessions WHERE id = $1`, id).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(state, "stale") || strings.Contains(state, "/tmp") || !strings.Contains(state, "fresh") {
		t.Fatalf("the saved state is %s: the stale replica wrote it", state)
	}
}

// grepLines returns the lines of text that contain word.
func grepLines(text, word string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
