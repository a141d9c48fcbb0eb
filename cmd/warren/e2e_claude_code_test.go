package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// claudeCodeVersion pins Claude Code, the MCP client README.md and
// docs/claude-desktop.md show how to add warren to.
const claudeCodeVersion = "2.1.197"

// The commands the docs give Claude Code users work: 'claude mcp add' of
// warren over stdio and over HTTP with a bearer header, then 'claude mcp
// list', which starts or reaches each server and completes the MCP
// handshake, reports both connected; a wrong token is reported as failing.
// (A model is needed to make Claude Code call a tool, and none is
// reachable here; the handshake is what these commands check.)
func TestClaudeCodeAddsWarrenOverStdioAndHTTP(t *testing.T) {
	needJail(t)
	claude := installNPM(t, "claude-code", "@anthropic-ai/claude-code@"+claudeCodeVersion, "claude")
	home, project := t.TempDir(), t.TempDir()
	data := jailDir(t)
	token := createToken(t, data, "cc")
	srv := serveHTTP(t, "--data-dir", data)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(claude, args...)
		cmd.Dir = project
		// Its own home: the user's ~/.claude.json is never read or written.
		cmd.Env = append(os.Environ(), "HOME="+home, "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("claude %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mcp", "add", "warren", "--", warrenBin, "serve", "stdio", "--workspace", project, "--data-dir", jailDir(t))
	run("mcp", "add", "--transport", "http", "warren-http", srv.url, "--header", "Authorization: Bearer "+token)
	run("mcp", "add", "--transport", "http", "warren-wrong-token", srv.url, "--header", "Authorization: Bearer wrn_not-a-token")
	list := run("mcp", "list")
	for name, want := range map[string]string{"warren": "Connected", "warren-http": "Connected", "warren-wrong-token": "Failed"} {
		var line string
		for _, l := range strings.Split(list, "\n") {
			if strings.HasPrefix(l, name+":") {
				line = l
			}
		}
		if !strings.Contains(line, want) {
			t.Errorf("claude mcp list, %s: %q, want %s\n%s", name, line, want, list)
		}
	}
}

// installNPM installs a pinned npm package under bin/<dir> (once; CI has
// npm) and returns the path of its command.
func installNPM(t *testing.T, dir, pkg, command string) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(root, "bin", dir+"-"+pkg[strings.LastIndex(pkg, "@")+1:])
	bin := filepath.Join(prefix, "node_modules", ".bin", command)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	out, err := exec.Command("npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", prefix, pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("npm install %s (the tests need npm and the npm registry): %v\n%s", pkg, err, out)
	}
	return bin
}
