package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// leanClient speaks streamable HTTP with prepared request bodies and no
// JSON decoding beyond a substring check: a load generator, like wrk, so
// that the measure is the server's capacity and not the client library's.
type leanClient struct {
	url, token, session string
	http                *http.Client
}

func (c *leanClient) post(body []byte) ([]byte, http.Header, error) {
	req, _ := http.NewRequest("POST", c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return out, resp.Header, fmt.Errorf("HTTP %d: %s", resp.StatusCode, out)
	}
	return out, resp.Header, err
}

// BenchmarkConcurrentShellExecLean is BenchmarkConcurrentShellExec with
// lean clients: 8 users, 8 sessions, one 'serve http' on GOMAXPROCS=2.
// Target: ≥ 3,000 calls/s.
func BenchmarkConcurrentShellExecLean(b *testing.B) {
	needJail(b)
	const clients = 8
	data := jailDir(b)
	b.Setenv("GOMAXPROCS", "2")
	tokens := make([]string, clients)
	for i := range tokens {
		tokens[i] = createToken(b, data, fmt.Sprintf("lean%d", i))
	}
	srv := serveHTTP(b, "--data-dir", data)
	transport := &http.Transport{MaxIdleConnsPerHost: clients}
	call := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shell_exec","arguments":{"command":"echo hi"}}}`)
	cs := make([]*leanClient, clients)
	for i := range cs {
		c := &leanClient{url: srv.url, token: tokens[i], http: &http.Client{Transport: transport}}
		_, h, err := c.post([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"lean","version":"1"}}}`))
		if err != nil {
			b.Fatal(err)
		}
		c.session = h.Get("Mcp-Session-Id")
		if _, _, err := c.post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
			b.Fatal(err)
		}
		for range 10 {
			if out, _, err := c.post(call); err != nil || !strings.Contains(string(out), `"stdout":"hi\n"`) {
				b.Fatalf("warm-up call: %v %s", err, out)
			}
		}
		cs[i] = c
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	per := max(b.N/clients, 1)
	for _, c := range cs {
		wg.Go(func() {
			for range per {
				if out, _, err := c.post(call); err != nil || !strings.Contains(string(out), `"exit_code":0`) {
					b.Errorf("call: %v %.200s", err, out)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.ReportMetric(float64(per*clients)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(runtime.NumCPU()), "host-cpus")
}
