package main

import (
	"os"
	"os/exec"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// bridgeVersion pins mcp-remote, the stdio-to-HTTP bridge docs/claude-desktop.md
// tells macOS and Windows users to run.
const bridgeVersion = "0.15.1"

// Claude Desktop on macOS and Windows cannot run bubblewrap: it launches a
// stdio bridge that forwards to a remote `warren serve http` with the
// bearer header. The documented command works: a client speaking stdio to
// the bridge runs a command in a real jail on the server.
func TestDesktopBridgeReachesARemoteServer(t *testing.T) {
	needJail(t)
	bridge := installBridge(t)
	data := jailDir(t)
	token := createToken(t, data, "desk")
	srv := serveHTTP(t, "--data-dir", data)
	// As docs/claude-desktop.md configures it: the token in the
	// environment, not in argv, which process listings show.
	cmd := exec.Command(bridge, srv.url, "--allow-http", "--transport", "http-only",
		"--header", "Authorization:${WARREN_AUTH}")
	cmd.Env = append(os.Environ(), "WARREN_AUTH=Bearer "+token)
	cmd.Stderr = newTestLog(t, "bridge: ")
	c := connect(t, &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second})
	if got := c.exec("echo through-the-bridge")["stdout"]; got != "through-the-bridge\n" {
		t.Fatalf("shell_exec through the bridge: %q", got)
	}
}

// installBridge installs the pinned mcp-remote under bin/ (once; CI has
// npm) and returns its command.
func installBridge(t *testing.T) string {
	t.Helper()
	return installNPM(t, "bridge", "mcp-remote@"+bridgeVersion, "mcp-remote")
}
