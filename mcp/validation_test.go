package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestBadArgumentsAreExplained sends tool calls with bad arguments through
// the real mcp-go server: the answer is a tool error in plain words.
func TestBadArgumentsAreExplained(t *testing.T) {
	srv, err := New(Options{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		tool string
		args string
		want []string
	}{
		{"shell_exec", `{}`, []string{"missing property 'command'"}},
		{"shell_exec", `{"command": 42}`, []string{"argument command", "want string"}},
		{"shell_exec", `{"command": "ls", "timeout_ms": "soon"}`, []string{"argument timeout_ms", "want integer"}},
		{"read_file", `{"path": "a", "bogus": 1}`, []string{"bogus"}},
		{"shell_exec", `{"command": "ls", "timeout_ms": 1.5}`, []string{"argument timeout_ms", "want integer"}},
		{"shell_exec", `null`, []string{"missing property 'command'"}},
		{"shell_exec", `{"command": ["ls"]}`, []string{"argument command", "want string"}},
	}
	for _, c := range cases {
		msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + c.tool + `","arguments":` + c.args + `}}`
		resp := srv.MCPServer().HandleMessage(context.Background(), json.RawMessage(msg))
		out, _ := json.Marshal(resp)
		var r struct {
			Result struct {
				IsError bool `json:"isError"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		if err := json.Unmarshal(out, &r); err != nil || !r.Result.IsError || len(r.Result.Content) != 1 {
			t.Errorf("%s %s: want a tool error, got %s", c.tool, c.args, out)
			continue
		}
		text := r.Result.Content[0].Text
		for _, w := range append(c.want, "invalid arguments for "+c.tool) {
			if !strings.Contains(text, w) {
				t.Errorf("%s %s: %q lacks %q", c.tool, c.args, text, w)
			}
		}
		if strings.Contains(text, "&{") {
			t.Errorf("%s %s: raw Go value in %q", c.tool, c.args, text)
		}
	}
}

// TestGoodArgumentsPassValidation: arguments that match the schema reach
// the tool (here it fails for want of a caller, not of its arguments).
func TestGoodArgumentsPassValidation(t *testing.T) {
	srv, err := New(Options{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{`{"command": "ls"}`, `{"command": "ls", "timeout_ms": 1000, "yield_ms": 5}`} {
		msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell_exec","arguments":` + args + `}}`
		out, _ := json.Marshal(srv.MCPServer().HandleMessage(context.Background(), json.RawMessage(msg)))
		if strings.Contains(string(out), "invalid arguments") || strings.Contains(string(out), "validation") {
			t.Errorf("shell_exec %s: refused: %s", args, out)
		}
		if !strings.Contains(string(out), "user") {
			t.Errorf("shell_exec %s: %s, want the tool's own refusal (no user)", args, out)
		}
	}
}
