package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveHTTPLimited starts 'warren serve http' with at most nofile open
// descriptors (soft and hard: Go raises the soft limit to the hard one).
func serveHTTPLimited(t *testing.T, nofile int, args ...string) *httpServer {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$@"`, nofile), "sh",
		warrenBin, "serve", "http", "--addr", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
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
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct{ URL string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.URL != "" {
				select {
				case urls <- line.URL:
				default:
				}
			}
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

// TestHTTPStalledBodiesCannotStarveTheServer: 300 connections from one
// address that send headers without a token and never finish their body do
// not take the server's descriptors: /healthz and other clients keep being
// served, and the stalled requests are ended.
func TestHTTPStalledBodiesCannotStarveTheServer(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	tok := createToken(t, data, "alice")
	srv := serveHTTPLimited(t, 256, "--data-dir", data, "--body-timeout", "1s")
	host := strings.TrimPrefix(strings.TrimSuffix(srv.url, "/mcp"), "http://")

	// The attacker comes from 127.0.0.2 (loopback too), the others from
	// 127.0.0.1.
	attacker := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	var stalled []net.Conn
	defer func() {
		for _, c := range stalled {
			c.Close()
		}
	}()
	for range 300 {
		c, err := attacker.Dial("tcp", host)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		stalled = append(stalled, c)
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\"", host)
	}

	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + host + "/healthz")
	if err != nil {
		t.Fatalf("/healthz while 300 connections stall: %v", err)
	}
	resp.Body.Close()
	alice := connectHTTP(t, srv, tok)
	if got := alice.exec("echo still here"); got["stdout"] != "still here\n" {
		t.Fatalf("another client while 300 connections stall: %v", got)
	}

	// Every stalled connection is answered and closed: at once when over
	// the per-address limit (503), after the body timeout otherwise (401,
	// as it has no token).
	statuses := map[string]int{}
	for _, c := range stalled {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		// A refused connection may be reset after its answer: the server
		// closes it without reading the request.
		b, err := io.ReadAll(c)
		line, _, _ := strings.Cut(string(b), "\r\n")
		if line == "" {
			t.Fatalf("a stalled connection was not ended: %q, %v", b, err)
		}
		statuses[line]++
	}
	t.Logf("stalled connections ended with %v", statuses)
	if statuses["HTTP/1.1 503 Service Unavailable"] == 0 || statuses["HTTP/1.1 401 Unauthorized"] == 0 {
		t.Fatalf("want some refused at once (503) and the rest timed out (401): %v", statuses)
	}
}

// TestHTTPUnauthorizedTellsWhatToDo: the bearer scheme in any case works; a
// client without a token is told how to get one, also an OAuth-capable
// client that goes looking for a login.
func TestHTTPUnauthorizedTellsWhatToDo(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	tok := createToken(t, data, "alice")
	srv := serveHTTP(t, "--data-dir", data)
	base := strings.TrimSuffix(srv.url, "/mcp")
	ping := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		req, _ := http.NewRequest("POST", srv.url, strings.NewReader(ping))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", scheme+" "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Authorization: %s <token>: %d, want 200", scheme, resp.StatusCode)
		}
	}

	resp, err := http.Post(srv.url, "application/json", strings.NewReader(ping))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	challenge := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "warren token create") ||
		!strings.HasPrefix(challenge, "Bearer ") || strings.Contains(challenge, "resource_metadata") {
		t.Fatalf("no token: %d %q, WWW-Authenticate %q", resp.StatusCode, body, challenge)
	}

	// What the TypeScript SDK's auth provider does next: no protected
	// resource or authorization server metadata, so it registers a client
	// at /register and shows the error it gets.
	for _, p := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404 (warren advertises no OAuth)", p, resp.StatusCode)
		}
	}
	resp, err = http.Post(base+"/register", "application/json", strings.NewReader(`{"redirect_uris":["http://localhost:1/cb"]}`))
	if err != nil {
		t.Fatal(err)
	}
	var oauthErr struct {
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
	}
	err = json.NewDecoder(resp.Body).Decode(&oauthErr)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusBadRequest || oauthErr.Error == "" ||
		!strings.Contains(oauthErr.ErrorDescription, "warren token create") {
		t.Fatalf("/register: %d %+v %v", resp.StatusCode, oauthErr, err)
	}
}

// TestHTTPLogsAreJSON: what mcp-go's transport logs (a line for every
// client's GET stream) comes out as warren's JSON log lines, not plain text.
func TestHTTPLogsAreJSON(t *testing.T) {
	needJail(t)
	stderr := &syncBuffer{}
	cmd := exec.Command(warrenBin, "serve", "http", "--addr", "127.0.0.1:0", "--auth", "none", "--data-dir", jailDir(t), "--log-level", "debug")
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var url string
	for i := 0; i < 300 && url == ""; i++ {
		time.Sleep(20 * time.Millisecond)
		var line struct{ URL string }
		for _, l := range strings.Split(stderr.String(), "\n") {
			if json.Unmarshal([]byte(l), &line) == nil && line.URL != "" {
				url = line.URL
			}
		}
	}
	if url == "" {
		t.Fatalf("no URL logged: %s", stderr.String())
	}
	c := &rawMCP{t: t, url: url}
	c.initialize()
	for range 3 {
		if code, _ := c.status("GET", ""); code != http.StatusMethodNotAllowed {
			t.Fatalf("GET stream: %d, want 405 (warren serves progress on the POST's stream)", code)
		}
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	sawGET := false
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("log line is not JSON: %q", l)
		}
		sawGET = sawGET || strings.Contains(l, "GET")
	}
	if !sawGET {
		t.Errorf("the refused GET streams were not logged at debug level: %q", lines)
	}
}

// fromAddr is an HTTP transport that dials from a given loopback address
// and adds headers (a bearer token, X-Forwarded-For) to every request.
type fromAddr struct {
	base    *http.Transport
	headers map[string]string
}

func (f fromAddr) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range f.headers {
		r.Header.Set(k, v)
	}
	return f.base.RoundTrip(r)
}

func dialingFrom(ip string, headers map[string]string) http.RoundTripper {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return fromAddr{base: &http.Transport{DialContext: d.DialContext}, headers: headers}
}

// stall opens a connection from ip and sends a request whose body never
// comes, with the given extra header lines: it holds the connection (and,
// with a token, counts as its user's) until the body timeout.
func stall(t *testing.T, host, ip, headers string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", host)
	if err != nil {
		t.Fatalf("dial from %s: %v", ip, err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n%s\r\n{\"jsonrpc\"", host, headers)
	return c
}

// answered reads the status line a stalled connection got at once, or ""
// when it is still waiting (its request holds its slot).
func answered(c net.Conn) string {
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	b := make([]byte, 4096)
	n, _ := c.Read(b)
	c.SetReadDeadline(time.Time{})
	line, _, _ := strings.Cut(string(b[:n]), "\r\n")
	return line
}

// TestHTTPConnsAreLimitedPerUser: clients that share one address, behind a
// NAT or a reverse proxy, each get their own cap once authenticated: one
// user holding all of its connections denies itself, not the others. Only
// a trusted proxy's X-Forwarded-For is read, so an attacker's spoofed one
// does not escape the cap of its address.
func TestHTTPConnsAreLimitedPerUser(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	aliceTok, bobTok := createToken(t, data, "alice"), createToken(t, data, "bob")
	dave, carol := createToken(t, data, "dave"), createToken(t, data, "carol")
	srv := serveHTTP(t, "--data-dir", data, "--max-conns-per-client", "4", "--max-conns-per-user", "4",
		"--trusted-proxy", "127.0.0.3", "--body-timeout", "60s")
	host := strings.TrimPrefix(strings.TrimSuffix(srv.url, "/mcp"), "http://")
	const refused = "HTTP/1.1 503 Service Unavailable"

	// Direct, one address (127.0.0.1, as behind a NAT): alice holds her 4
	// connections and more than the address's 4; her next is refused, and
	// says why; bob from the same address is still served.
	for i := range 6 {
		c := stall(t, host, "127.0.0.1", "Authorization: Bearer "+aliceTok+"\r\n")
		got := answered(c)
		if i < 4 && got != "" {
			t.Fatalf("alice's connection %d: %q, want it held", i+1, got)
		}
		if i >= 4 && got != refused {
			t.Fatalf("alice's connection %d, over her cap of 4: %q, want %q", i+1, got, refused)
		}
	}
	bob := connect(t, &sdk.StreamableClientTransport{Endpoint: srv.url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: dialingFrom("127.0.0.1", map[string]string{"Authorization": "Bearer " + bobTok})}})
	if got := bob.exec("echo bob direct"); got["stdout"] != "bob direct\n" {
		t.Fatalf("bob from alice's address while she holds her cap: %v", got)
	}

	// Through the trusted proxy (127.0.0.3), every client shares its
	// address: its requests count per user. Dave holds his 4, his next is
	// refused, and carol is still served through the same proxy.
	for i := range 5 {
		c := stall(t, host, "127.0.0.3", "Authorization: Bearer "+dave+"\r\nX-Forwarded-For: 10.0.0.2\r\n")
		if got := answered(c); i < 4 && got != "" || i >= 4 && got != refused {
			t.Fatalf("dave's request %d through the proxy: %q", i+1, got)
		}
	}
	viaProxy := connect(t, &sdk.StreamableClientTransport{Endpoint: srv.url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: dialingFrom("127.0.0.3", map[string]string{"Authorization": "Bearer " + carol, "X-Forwarded-For": "10.0.0.3"})}})
	if got := viaProxy.exec("echo carol"); got["stdout"] != "carol\n" {
		t.Fatalf("carol through the proxy while dave holds his cap there: %v", got)
	}

	// An untrusted client (127.0.0.2) that sends X-Forwarded-For is still
	// one address: every spoofed header is ignored, and past 4
	// connections it is refused at once.
	got := map[string]int{}
	for i := range 8 {
		got[answered(stall(t, host, "127.0.0.2", fmt.Sprintf("X-Forwarded-For: 10.1.0.%d\r\n", i)))]++
	}
	if got[refused] != 4 || got[""] != 4 {
		t.Fatalf("8 connections from one untrusted address with 8 X-Forwarded-For: %v, want 4 held and 4 refused", got)
	}
}

// TestSignInLimitSeesClientsBehindATrustedProxy: the console's sign-in
// rate limit counts each client behind a --trusted-proxy by its
// X-Forwarded-For address, so one client's flood of token guesses does
// not lock out another client of the same proxy; a spoofed
// X-Forwarded-For from an untrusted address changes nothing.
func TestSignInLimitSeesClientsBehindATrustedProxy(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	createToken(t, data, "alice")
	srv := serveHTTP(t, "--data-dir", data, "--trusted-proxy", "127.0.0.3")
	base := strings.TrimSuffix(srv.url, "/mcp")
	attempt := func(from, forwarded string) int {
		t.Helper()
		headers := map[string]string{"Origin": base}
		if forwarded != "" {
			headers["X-Forwarded-For"] = forwarded
		}
		c := &http.Client{Transport: dialingFrom(from, headers)}
		resp, err := c.Post(base+"/console/login", "application/json", strings.NewReader(`{"token":"wrn_guess"}`))
		if err != nil {
			t.Fatalf("sign-in from %s: %v", from, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	flood := func(from string, forwarded func(i int) string) int {
		refused := 0
		for i := range 40 {
			if attempt(from, forwarded(i)) == http.StatusTooManyRequests {
				refused++
			}
		}
		return refused
	}
	if n := flood("127.0.0.3", func(int) string { return "10.0.0.9" }); n == 0 {
		t.Fatal("40 guesses from one client behind the proxy: none refused")
	}
	if code := attempt("127.0.0.3", "10.0.0.10"); code == http.StatusTooManyRequests {
		t.Errorf("another client behind the same trusted proxy is refused (%d): the proxy's clients share one limit", code)
	}
	if n := flood("127.0.0.2", func(i int) string { return fmt.Sprintf("10.1.0.%d", i) }); n == 0 {
		t.Error("an untrusted address escapes the limit by sending a new X-Forwarded-For each time")
	}
}

// TestHTTPHeadersAreBounded: a request whose headers are over the server's
// 64 KiB gets 431 before anything reads them; a request near the limit is
// served as usual.
func TestHTTPHeadersAreBounded(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	token := createToken(t, data, "alice")
	srv := serveHTTP(t, "--data-dir", data)
	send := func(padding int) int {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-Padding", strings.Repeat("p", padding))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("request with %d bytes of headers: %v", padding, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send(1 << 20); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("1 MB of headers: %d, want 431", code)
	}
	if code := send(32 << 10); code == http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("32 KB of headers: refused (%d)", code)
	}
}
