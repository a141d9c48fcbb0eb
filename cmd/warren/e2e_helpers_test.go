package main

// End-to-end tests: they build the warren binary and drive it with the
// official Go SDK (github.com/modelcontextprotocol/go-sdk), an MCP client
// independent of the mcp-go server under test.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/warrenhq/warren/sessions/sqlschema/sqltest"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sandbox/runner/runnertest"
)

// warrenBin is the binary built once by TestMain.
var warrenBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "warren-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	warrenBin = filepath.Join(dir, "warren")
	// Built as 'just build' builds it (static, stripped, the version naming
	// the commit), so that what the tests and benchmarks measure is what
	// users run, and TestJustBuildIsStrippedStaticAndVersioned's build is
	// a link of what this one compiled.
	version := "dev"
	if v, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output(); err == nil {
		version = strings.TrimSpace(string(v))
	}
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version, "-o", warrenBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build warren: %v\n%s", err, out)
		os.Exit(1)
	}
	// The runner beside it, as 'just build' puts it; in-process tests
	// (whose binary has none beside it) find it through $WARREN_RUNNER.
	runner, err := runnertest.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv(sandbox.RunnerEnv, runner)
	code := m.Run()
	sqltest.StopShared() // the PostgreSQL of the tests that use one
	os.RemoveAll(dir)
	os.Exit(code)
}

// needJail fails when this machine cannot run bubblewrap: the tests need
// real jails, and a skipped test would pass CI without testing anything.
func needJail(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap is not installed: run 'just deps' (CI installs it; these tests need real jails)")
	}
}

// jailDir returns a fresh directory that a jail running as another uid (the
// tests run as root in CI) can reach: t.TempDir's parent is 0700.
func jailDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chmod(filepath.Dir(d), 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// wire records every message the client reads, in order, so that tests can
// check what arrived before a response.
type wire struct {
	mu   sync.Mutex
	msgs []jsonrpc.Message
}

func (w *wire) snapshot() []jsonrpc.Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]jsonrpc.Message(nil), w.msgs...)
}

type recordingTransport struct {
	sdk.Transport
	w *wire
}

func (r recordingTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := r.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return recordingConn{c, r.w}, nil
}

type recordingConn struct {
	sdk.Connection
	w *wire
}

func (c recordingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err == nil {
		c.w.mu.Lock()
		c.w.msgs = append(c.w.msgs, m)
		c.w.mu.Unlock()
	}
	return m, err
}

// client is a user of warren: an MCP client session plus what it saw.
type client struct {
	t       testing.TB
	cs      *sdk.ClientSession
	wire    *wire
	outputs outputSchemas
}

func connect(t testing.TB, tr sdk.Transport) *client {
	t.Helper()
	w := &wire{}
	c := sdk.NewClient(&sdk.Implementation{Name: "warren-e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, recordingTransport{tr, w}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return &client{t: t, cs: cs, wire: w}
}

// serveStdio starts 'warren serve stdio' with args and connects to it.
func serveStdio(t testing.TB, args ...string) *client {
	t.Helper()
	cmd := exec.Command(warrenBin, append([]string{"serve", "stdio"}, args...)...)
	cmd.Stderr = newTestLog(t, "server: ")
	return connect(t, &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second})
}

// testLog forwards the server's stderr to the test log (shown for failed
// tests and with -v), line by line; after the test has finished, when
// t.Log would panic, lines go to stderr only with WARREN_E2E_VERBOSE set.
type testLog struct {
	t      testing.TB
	prefix string
	mu     sync.Mutex
	done   bool
	buf    []byte
}

func newTestLog(t testing.TB, prefix string) *testLog {
	l := &testLog{t: t, prefix: prefix}
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.buf) > 0 {
			t.Logf("%s%s", l.prefix, l.buf)
		}
		l.done = true
	})
	return l
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		if os.Getenv("WARREN_E2E_VERBOSE") != "" {
			fmt.Fprintf(os.Stderr, "%s%s", l.prefix, p)
		}
		return len(p), nil
	}
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.t.Logf("%s%s", l.prefix, l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

// call calls a tool and fails the test on a protocol error.
func (c *client) call(name string, args map[string]any) *sdk.CallToolResult {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		c.t.Fatalf("%s %v: protocol error: %v", name, args, err)
	}
	if !res.IsError && res.StructuredContent != nil {
		c.checkOutput(c.t, name, res.StructuredContent)
	}
	return res
}

// ok calls a tool, requires a successful result and returns its structured
// content.
func (c *client) ok(name string, args map[string]any) map[string]any {
	c.t.Helper()
	res := c.call(name, args)
	if res.IsError {
		c.t.Fatalf("%s %v: tool error: %s", name, args, textOf(res))
	}
	return structured(c.t, res)
}

// fails calls a tool and requires a tool error whose text contains want.
func (c *client) fails(name string, args map[string]any, want string) {
	c.t.Helper()
	if strings.TrimSpace(want) == "" {
		c.t.Fatalf("fails(%s): say which words the error must contain (an empty want matches anything)", name)
	}
	res := c.call(name, args)
	if !res.IsError {
		c.t.Fatalf("%s %v: want a tool error containing %q, got success: %s", name, args, want, textOf(res))
	}
	if !strings.Contains(textOf(res), want) {
		c.t.Fatalf("%s %v: error %q does not contain %q", name, args, textOf(res), want)
	}
}

// exec runs a shell command and returns its structured result.
func (c *client) exec(command string, extra ...any) map[string]any {
	c.t.Helper()
	args := map[string]any{"command": command}
	for i := 0; i+1 < len(extra); i += 2 {
		args[extra[i].(string)] = extra[i+1]
	}
	return c.ok("shell_exec", args)
}

func textOf(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func structured(t testing.TB, res *sdk.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return m
}

// httpServer is a running 'warren serve http'.
type httpServer struct {
	url string
	cmd *exec.Cmd
}

// startServeHTTP starts 'warren serve http' on a free loopback port, its
// stdout logged to the test, and stops it when the test ends; the caller
// reads its stderr (the log, which names the URL first).
func startServeHTTP(t testing.TB, args ...string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command(warrenBin, append([]string{"serve", "http", "--addr", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = newTestLog(t, "server stdout: ")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	return cmd, stderr
}

// serveHTTP starts 'warren serve http' on a free loopback port and waits
// for it to say where it listens.
func serveHTTP(t testing.TB, args ...string) *httpServer {
	t.Helper()
	cmd, stderr := startServeHTTP(t, args...)
	urls := make(chan string, 1)
	lg := newTestLog(t, "server: ")
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			var line struct{ URL, Message string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.URL != "" && !sent {
				urls <- line.URL
				sent = true
			}
			lg.Write(append(sc.Bytes(), '\n'))
		}
	}()
	select {
	case u := <-urls:
		return &httpServer{url: u, cmd: cmd}
	case <-time.After(30 * time.Second):
		t.Fatal("warren serve http did not report its URL")
	}
	return nil
}

// bearer adds a token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}

// connectHTTP connects to srv with token.
func connectHTTP(t testing.TB, srv *httpServer, token string) *client {
	t.Helper()
	return connect(t, &sdk.StreamableClientTransport{
		Endpoint:   srv.url,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
		MaxRetries: -1,
	})
}

// createToken runs 'warren token create' and returns the token.
func createToken(t testing.TB, dataDir, user string) string {
	t.Helper()
	out, err := exec.Command(warrenBin, "token", "create", "--user", user, "--data-dir", dataDir).Output()
	if err != nil {
		t.Fatalf("token create: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// progressMessages returns the concatenated messages of the progress
// notifications for token among msgs.
func progressMessages(msgs []jsonrpc.Message, token string) string {
	var b strings.Builder
	for _, m := range msgs {
		req, ok := m.(*jsonrpc.Request)
		if !ok || req.Method != "notifications/progress" {
			continue
		}
		var p struct {
			ProgressToken any    `json:"progressToken"`
			Message       string `json:"message"`
		}
		if json.Unmarshal(req.Params, &p) == nil && fmt.Sprint(p.ProgressToken) == token {
			b.WriteString(p.Message)
		}
	}
	return b.String()
}

// callWithProgress calls shell_exec with a progress token and returns the
// result and the progress text that was on the wire before the result: the
// messages read after the call started, up to the first response (one call
// is in flight), so a notification that arrives after its result does not
// count.
func (c *client) callWithProgress(command, token string) (map[string]any, string) {
	c.t.Helper()
	from := len(c.wire.snapshot())
	p := &sdk.CallToolParams{Name: "shell_exec", Arguments: map[string]any{"command": command}}
	p.SetProgressToken(token)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.cs.CallTool(ctx, p)
	if err != nil {
		c.t.Fatalf("shell_exec: %v", err)
	}
	if res.IsError {
		c.t.Fatalf("shell_exec: %s", textOf(res))
	}
	msgs := c.wire.snapshot()[from:]
	for i, m := range msgs {
		if _, ok := m.(*jsonrpc.Response); ok {
			msgs = msgs[:i]
			break
		}
	}
	return structured(c.t, res), progressMessages(msgs, token)
}
