package main

import (
	"fmt"
	"io"
	"os"
)

// stdioHint tells a person who started `serve stdio` by hand (stdin is a
// terminal: no MCP client is attached) what they are looking at, instead of
// a silent wait. A client always gives the server pipes, never a terminal,
// so clients never see this; it goes to stderr either way.
func stdioHint(w io.Writer, workspace string) {
	where := "your default session (an empty workspace)"
	if workspace != "" {
		where = workspace
	}
	exe, _ := os.Executable()
	if exe == "" {
		exe = "warren"
	}
	fmt.Fprintf(w, `warren: this is an MCP server on stdio, serving %s.
It is waiting for an MCP client to speak JSON-RPC on stdin; typing here does nothing useful.

  Connect Claude Desktop or an IDE: add to its MCP servers
      {"command": %q, "args": ["serve", "stdio", "--workspace", "/path/to/project"]}
  Try the jail by hand:      %s shell --workspace DIR
  Serve over HTTP instead:   %s serve http   (prints a URL and a token)

Press Ctrl-D or Ctrl-C to stop.
`, where, exe, exe, exe)
}
