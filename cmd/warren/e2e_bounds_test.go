package main

// Attack-shaped tests of issue 21, item 3: every string a client or a
// jail controls is bounded before it is stored, logged or kept.

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveHTTPCounted is serveHTTP that also counts the bytes the server
// logs (its stderr): what an operator's log file would grow by.
func serveHTTPCounted(t *testing.T, args ...string) (*httpServer, *atomic.Int64) {
	srv, logged, _ := serveHTTPMeasured(t, args...)
	return srv, logged
}

// serveHTTPMeasured is serveHTTPCounted that also keeps the length of the
// longest line the server logged.
func serveHTTPMeasured(t *testing.T, args ...string) (*httpServer, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	cmd, stderr := startServeHTTP(t, args...)
	var logged, longest atomic.Int64
	lines := newTestLog(t, "server: ")
	urls := make(chan string, 1)
	go func() {
		r := bufio.NewReaderSize(stderr, 64<<10)
		sent := false
		var cur int64
		for {
			line, err := r.ReadSlice('\n')
			logged.Add(int64(len(line)))
			if cur == 0 && len(line) > 0 {
				lines.Write(line[:min(len(line), 160)])
				lines.Write([]byte("\n"))
			}
			if cur += int64(len(line)); cur > longest.Load() {
				longest.Store(cur)
			}
			if err == nil {
				cur = 0
			}
			if !sent {
				var l struct{ URL string }
				if json.Unmarshal(line, &l) == nil && l.URL != "" {
					urls <- l.URL
					sent = true
				}
			}
			if err != nil && err != bufio.ErrBufferFull {
				return
			}
		}
	}()
	select {
	case u := <-urls:
		return &httpServer{url: u, cmd: cmd}, &logged, &longest
	case <-time.After(30 * time.Second):
		t.Fatal("warren serve http did not report its URL")
	}
	return nil, nil, nil
}

// heapBytes is the server's heap in use, from its /metrics.
func heapBytes(t *testing.T, srv *httpServer, token string) float64 {
	t.Helper()
	base := strings.TrimSuffix(srv.url, "/mcp")
	return value(scrape(t, base, token), "go_memstats_heap_inuse_bytes")
}

// openDBReadOnly opens the server's database beside it, read-only.
func openDBReadOnly(t *testing.T, dataDir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dataDir, "warren.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// connectFlood is a perl program run in the jail: n CONNECTs to the
// session's proxy, each with a host name of size bytes, each on its own
// connection; it prints the status line of each answer. It stops writing
// as soon as the proxy answers, as a client would.
const connectFlood = `perl -MIO::Socket::INET -MIO::Select -e '
$SIG{PIPE} = "IGNORE";
my ($n, $size) = @ARGV;
for my $i (1..$n) {
  my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => 3128) or die "connect: $!";
  my $req = "CONNECT " . ("a" x $size) . ".example:443 HTTP/1.1\r\n\r\n";
  $s->blocking(0);
  my $sel = IO::Select->new($s);
  my $off = 0;
  while ($off < length $req) {
    last if $sel->can_read(0);
    next unless $sel->can_write(0.1);
    my $w = syswrite($s, $req, 65536, $off);
    last if !defined $w && !$!{EAGAIN};
    $off += $w // 0;
  }
  $s->blocking(1);
  my $line = $sel->can_read(20) ? <$s> : undef;
  print defined $line ? $line : "no answer\n";
  close $s;
}' `

// TestProxyBoundsRefusedTargets: a jail floods its egress proxy with
// CONNECTs for megabyte host names, then with host names that fit in a
// request but not in DNS. Each gets a refusal, and what the server keeps
// of them (its log, the network log table, its heap) stays small.
func TestProxyBoundsRefusedTargets(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	tok := createToken(t, data, "alice")
	srv, logged := serveHTTPCounted(t, "--data-dir", data)
	c := connectHTTP(t, srv, tok)
	s := c.ok("session_create", map[string]any{"network": map[string]any{"mode": "allowlist", "allow": []any{"npm"}}})
	id := s["session_id"].(string)
	c.exec("true", "session_id", id) // the shell is up before measuring

	heap0, log0 := heapBytes(t, srv, tok), logged.Load()
	status := regexp.MustCompile(`^HTTP/1\.[01] 4\d\d `)
	check := func(out map[string]any, n int) {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(out["stdout"].(string)), "\n")
		if len(lines) != n {
			t.Fatalf("want %d answers, got %d: %v", n, len(lines), out)
		}
		for _, l := range lines {
			if !status.MatchString(l) {
				t.Fatalf("an over-long target was not refused with a 4xx: %q (%v)", l, out)
			}
		}
	}
	// 40 × 1 MB host names: refused before they are read whole.
	check(c.exec(connectFlood+"40 1000000", "session_id", id, "timeout_ms", 300000), 40)
	// 40 × 6 KB host names: they fit a request, not a DNS name.
	check(c.exec(connectFlood+"40 6000", "session_id", id, "timeout_ms", 120000), 40)

	db := openDBReadOnly(t, data)
	var rows, longest, total int64
	waitFor(t, "the refusals in the network log table", 15*time.Second, func() bool {
		err := db.QueryRow(`SELECT COUNT(*), COALESCE(MAX(LENGTH(CAST(target AS BLOB)) + LENGTH(CAST(reason AS BLOB))), 0),
			COALESCE(SUM(LENGTH(CAST(target AS BLOB)) + LENGTH(CAST(reason AS BLOB)) + LENGTH(CAST(host AS BLOB))), 0)
			FROM network_log WHERE session_id = ?`, id).Scan(&rows, &longest, &total)
		return err == nil && rows >= 40
	})
	heap1, log1 := heapBytes(t, srv, tok), logged.Load()
	t.Logf("network_log: %d rows, longest target+reason %d B, total %d B; log +%d B; heap in use %+.1f MiB",
		rows, longest, total, log1-log0, (heap1-heap0)/(1<<20))
	if longest > 2<<10 {
		t.Errorf("one network_log row keeps %d bytes of target and reason; want at most 2 KiB", longest)
	}
	if total > 200<<10 {
		t.Errorf("the network log table keeps %d bytes of targets; want at most 200 KiB for 80 refusals", total)
	}
	if d := log1 - log0; d > 200<<10 {
		t.Errorf("the server's log grew by %d bytes for 80 refusals; want at most 200 KiB", d)
	}
	if d := heap1 - heap0; d > 16<<20 {
		t.Errorf("the server's heap grew by %.1f MiB; want at most 16 MiB", d/(1<<20))
	}
	// The refusals are listed, each line short, and still say why.
	list := c.ok("session_network_log", map[string]any{"session_id": id})
	b, _ := json.Marshal(list)
	if len(b) > 400<<10 {
		t.Errorf("session_network_log answers %d bytes", len(b))
	}
	if !strings.Contains(string(b), "longer than 253") {
		t.Errorf("the refusals do not say the name is too long: %.2000s", b)
	}
}

// connectNamed connects to warren over tr as a client that calls itself
// name, at version version.
func connectNamed(t *testing.T, tr sdk.Transport, name, version string) *client {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: name, Version: version}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return &client{t: t, cs: cs, wire: &wire{}}
}

// TestClientNamesAreBounded: a client that gives itself a 4 MB name and
// version in initialize makes ten calls, over stdio and over HTTP. What
// the activity log and the usage records keep of its name is at most
// 128 bytes per row, and it still tells the client apart.
func TestClientNamesAreBounded(t *testing.T) {
	needJail(t)
	big := "evil-" + strings.Repeat("x", 4<<20)
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			data := jailDir(t)
			var c *client
			if transport == "stdio" {
				cmd := exec.Command(warrenBin, "serve", "stdio", "--data-dir", data)
				cmd.Stderr = newTestLog(t, "server: ")
				c = connectNamed(t, &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second}, big, big)
			} else {
				tok := createToken(t, data, "alice")
				srv := serveHTTP(t, "--data-dir", data)
				c = connectNamed(t, &sdk.StreamableClientTransport{Endpoint: srv.url, MaxRetries: -1,
					HTTPClient: &http.Client{Transport: bearer{tok, http.DefaultTransport}}}, big, big)
			}
			for i := 0; i < 10; i++ {
				c.exec(fmt.Sprintf("echo call %d", i))
			}
			// What a client reports of its model is its own too: an
			// over-long model or client name is refused, not stored.
			for _, args := range []map[string]any{{"model": big, "input_tokens": 1, "output_tokens": 1},
				{"model": "gpt-4o", "client": big, "input_tokens": 1, "output_tokens": 1}} {
				res := c.call("usage_record", args)
				if text := textOf(res); !res.IsError || !strings.Contains(text, "name is") || len(text) > 2<<10 {
					t.Errorf("usage_record with a 4 MB name: error %v, answer of %d bytes: %.300q", res.IsError, len(text), text)
				}
			}
			db := openDBReadOnly(t, data)
			for _, q := range []struct{ what, sql string }{
				{"activity log", `SELECT COUNT(*), COALESCE(MAX(LENGTH(CAST(client AS BLOB))), 0), COALESCE(MIN(client), '') FROM session_events`},
				{"usage records", `SELECT COUNT(*), COALESCE(MAX(LENGTH(CAST(client AS BLOB))), 0), COALESCE(MIN(client), '') FROM usage_records`},
			} {
				var n, longest int64
				var name string
				waitFor(t, q.what+" rows", 15*time.Second, func() bool {
					return db.QueryRow(q.sql).Scan(&n, &longest, &name) == nil && n >= 10
				})
				t.Logf("%s: %d rows, longest client %d B", q.what, n, longest)
				if longest > 128 {
					t.Errorf("the %s keeps %d bytes of the client's name per row; want at most 128", q.what, longest)
				}
				if !strings.HasPrefix(name, "evil-xxx") {
					t.Errorf("the %s does not name the client: %.200q", q.what, name)
				}
			}
		})
	}
}

// TestActivityLogRedactsWarrenTokens: a token made with 'warren token
// create' that a command prints (from a file, and from the command line)
// never reaches the activity log that session_watch and the console show,
// nor the table it is kept in.
func TestActivityLogRedactsWarrenTokens(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	tok := createToken(t, data, "alice")
	if !strings.HasPrefix(tok, "wrn_") {
		t.Fatalf("warren token create printed %q", tok)
	}
	srv := serveHTTP(t, "--data-dir", data)
	c := connectHTTP(t, srv, tok)
	s := c.ok("session_create", map[string]any{})
	id := s["session_id"].(string)
	c.ok("write_file", map[string]any{"session_id": id, "path": "notes.txt", "content": "deploy with " + tok + "\n" + tok + "\n"})
	if out := c.exec("cat notes.txt", "session_id", id); !strings.Contains(out["stdout"].(string), tok) {
		t.Fatalf("the command did not print the token: %v", out)
	}
	c.exec("echo "+tok+" >&2", "session_id", id)

	watch := c.ok("session_watch", map[string]any{"session_id": id, "limit": 1000})
	b, _ := json.Marshal(watch)
	if len(watch["events"].([]any)) < 6 {
		t.Fatalf("session_watch: %s", b)
	}
	if strings.Contains(string(b), tok) || strings.Contains(string(b), tok[10:]) {
		t.Errorf("session_watch shows the token: %s", b)
	}
	if !strings.Contains(string(b), "[REDACTED]") {
		t.Errorf("session_watch does not mark what it redacted: %s", b)
	}
	db := openDBReadOnly(t, data)
	var n int
	waitFor(t, "the events written", 15*time.Second, func() bool {
		return db.QueryRow(`SELECT COUNT(*) FROM session_events WHERE session_id = ?`, id).Scan(&n) == nil && n >= 6
	})
	var leaked int
	if err := db.QueryRow(`SELECT COUNT(*) FROM session_events WHERE instr(summary, ?) > 0 OR instr(text, ?) > 0`,
		tok[10:], tok[10:]).Scan(&leaked); err != nil || leaked > 0 {
		t.Errorf("%d stored events hold the token (%v)", leaked, err)
	}
}

// TestLogLinesAreBounded: with the most verbose log an operator can ask
// for, a client that writes megabytes into what the server logs (a
// session_id, arguments it does not know, a tool that does not exist)
// makes no log line longer than a few KB.
func TestLogLinesAreBounded(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	tok := createToken(t, data, "alice")
	srv, _, longest := serveHTTPMeasured(t, "--data-dir", data, "--log-level", "debug")
	c := connectHTTP(t, srv, tok)
	c.exec("echo up")
	big := strings.Repeat("s", 1<<20)
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"shell_exec", map[string]any{"command": "echo hi", "session_id": big}},
		{"read_file", map[string]any{"path": big, "session_id": big}},
		{"session_control", map[string]any{"session_id": big, "action": big}},
		{"task_claim", map[string]any{"task_id": big}},
	} {
		c.call(call.tool, call.args) // refused or not: what matters is the log
	}
	c.exec("echo done")
	t.Logf("longest log line: %d bytes", longest.Load())
	if n := longest.Load(); n > 16<<10 {
		t.Errorf("the server logged a line of %d bytes; want at most 16 KiB", n)
	}
}
