package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNetworkPolicyOverHTTP drives the network policy as a remote agent
// would: an allowlist session reaches a pinned test host and nothing else,
// its allowlist changes while it lives, its decisions are listed, and the
// host's network is refused to HTTP clients unless the server allows it.
func TestNetworkPolicyOverHTTP(t *testing.T) {
	needJail(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from upstream")
	}))
	defer up.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "http://"))
	data := jailDir(t)
	// The operator pins the test's name to loopback: the only way past the
	// proxy's address checks, for this name only.
	cfg := filepath.Join(data, "config.json")
	if err := os.WriteFile(cfg, []byte(`{"network": {"hosts": {"upstream.test": "127.0.0.1"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tok := createToken(t, data, "alice")
	srv := serveHTTP(t, "--data-dir", data)
	c := connectHTTP(t, srv, tok)

	c.fails("session_create", map[string]any{"network": map[string]any{"mode": "host"}}, "--allow-host-network")
	c.fails("session_create", map[string]any{"network": map[string]any{"mode": "allowlist", "allow": []any{"*"}}}, "mode host")

	s := c.ok("session_create", map[string]any{"network": map[string]any{"mode": "allowlist", "allow": []any{"upstream.test:" + port}}})
	id := s["session_id"].(string)
	if n := s["network"].(map[string]any); n["mode"] != "allowlist" {
		t.Fatalf("session_create network: %v", n)
	}
	get := "curl -sS -w '\\n%{http_code}' http://upstream.test:" + port + "/"
	if out := c.exec(get, "session_id", id); !strings.HasPrefix(out["stdout"].(string), "hello from upstream") {
		t.Fatalf("allowed host: %v", out)
	}
	out := c.exec("curl -sS -w '\\n%{http_code}' http://other.test:"+port+"/", "session_id", id)
	if so := out["stdout"].(string); !strings.HasSuffix(so, "403") || !strings.Contains(so, "not in the session's allowlist") {
		t.Fatalf("denied host: %v", out)
	}
	if out := c.exec("curl -sS --max-time 5 --noproxy '*' "+up.URL, "session_id", id); out["exit_code"].(float64) == 0 {
		t.Fatalf("a direct connection left the jail: %v", out)
	}

	list := c.ok("session_list", map[string]any{})
	found := false
	for _, v := range list["sessions"].([]any) {
		v := v.(map[string]any)
		if v["session_id"] == id {
			b, _ := json.Marshal(v["network"])
			found = strings.Contains(string(b), `"allowlist"`) && strings.Contains(string(b), "upstream.test:"+port)
		}
	}
	if !found {
		t.Fatalf("session_list does not show the network policy: %v", list)
	}

	// A new allowlist applies to the next request of the same shell.
	c.ok("session_control", map[string]any{"session_id": id, "action": "network",
		"network": map[string]any{"mode": "allowlist", "allow": []any{"npm"}}})
	if out := c.exec(get, "session_id", id); !strings.HasSuffix(out["stdout"].(string), "403") {
		t.Fatalf("after the allowlist changed: %v", out)
	}

	log := c.ok("session_network_log", map[string]any{"session_id": id})
	var got []string
	for _, d := range log["decisions"].([]any) {
		d := d.(map[string]any)
		got = append(got, fmt.Sprintf("%v:%v %v %v", d["host"], d["port"], d["allowed"], d["reason"]))
	}
	want := []string{"upstream.test:" + port + " true <nil>",
		"other.test:" + port + " false other.test:" + port + " is not in the session's allowlist",
		"upstream.test:" + port + " false upstream.test:" + port + " is not in the session's allowlist"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("network log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// What moved through the proxy is usage of the session (kind network).
	waitFor(t, "network bytes in the usage report", 15*time.Second, func() bool {
		rep := c.ok("usage_report", map[string]any{"group_by": "kind"})
		for _, r := range rep["rows"].([]any) {
			r := r.(map[string]any)
			if r["key"] == "network" && r["network_bytes"].(float64) > 0 {
				return true
			}
		}
		return false
	})

	// Network off stays off: a session created without a policy has none.
	plain := c.ok("session_create", map[string]any{})
	if n := plain["network"].(map[string]any); n["mode"] != "none" {
		t.Fatalf("default network: %v", n)
	}
	if out := c.exec("printf '%s' \"$HTTP_PROXY\"; curl -sS --max-time 5 -x http://127.0.0.1:3128 http://upstream.test:"+port+"/",
		"session_id", plain["session_id"]); out["exit_code"].(float64) == 0 || strings.Contains(out["stdout"].(string), "hello") {
		t.Fatalf("a session without network reached out: %v", out)
	}

	// The CLI reads the same log from the database.
	cli := exec.Command(warrenBin, "session", "net-log", "--data-dir", data, "--user", "alice", id)
	cliOut, err := cli.CombinedOutput()
	if err != nil || !strings.Contains(string(cliOut), "DENY") || !strings.Contains(string(cliOut), "upstream.test:"+port) {
		t.Fatalf("warren session net-log: %v\n%s", err, cliOut)
	}
}

// TestHostNetworkNeedsTheServersConsent: an HTTP server started with
// --allow-host-network lets a client choose host mode.
func TestHostNetworkNeedsTheServersConsent(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	tok := createToken(t, data, "alice")
	srv := serveHTTP(t, "--data-dir", data, "--allow-host-network")
	c := connectHTTP(t, srv, tok)
	s := c.ok("session_create", map[string]any{"network": map[string]any{"mode": "host"}})
	if n := s["network"].(map[string]any); n["mode"] != "host" {
		t.Fatalf("network: %v", n)
	}
}
