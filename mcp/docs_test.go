package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestToolsReference keeps docs/tools.md generated from the registry.
// UPDATE_TOOLSNAPS=true rewrites it.
func TestToolsReference(t *testing.T) {
	got := toolsReference()
	path := filepath.Join("..", "docs", "tools.md")
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("docs/tools.md is stale or missing (%v): run UPDATE_TOOLSNAPS=true go test ./mcp/", err)
	}
}

func toolsReference() []byte {
	var b bytes.Buffer
	b.WriteString("# Tools reference\n\n<!-- Generated from the tool registry by mcp/docs_test.go: " +
		"run `UPDATE_TOOLSNAPS=true go test ./mcp/` after changing a tool. Do not edit. -->\n\n")
	var without []string
	for _, t := range Registry() {
		raw, _ := json.Marshal(t.Tool)
		var schema struct {
			InputSchema struct {
				Properties map[string]any `json:"properties"`
			} `json:"inputSchema"`
		}
		_ = json.Unmarshal(raw, &schema)
		if _, ok := schema.InputSchema.Properties["session_id"]; !ok {
			without = append(without, "`"+t.Tool.Name+"`")
		}
	}
	sort.Strings(without)
	b.WriteString("Tools that work in a session take an optional `session_id` (all but " + strings.Join(without, ", ") +
		"); omitted, it means your default session (with `serve stdio --workspace DIR`, the session bound to DIR). " +
		"Paths are relative to the workspace or absolute under `/workspace`. Errors the caller can fix come back " +
		"as tool results with `isError: true` and a message that says what to do.\n\n")
	b.WriteString("| toolset | tool | read-only | destructive | idempotent | open world |\n|---|---|---|---|---|---|\n")
	tools := Registry()
	for _, tool := range tools {
		a := tool.Tool.Annotations
		fmt.Fprintf(&b, "| %s | [`%s`](#%s) | %v | %v | %v | %v |\n", tool.Toolset, tool.Tool.Name, tool.Tool.Name,
			*a.ReadOnlyHint, *a.DestructiveHint, *a.IdempotentHint, *a.OpenWorldHint)
	}
	for _, tool := range tools {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n", tool.Tool.Name, tool.Tool.Description)
		b.WriteString("**Input**\n\n")
		writeFields(&b, tool.Tool.RawInputSchema)
		b.WriteString("\n**Output** (`structuredContent`; `content` holds a text rendering)\n\n")
		out, _ := json.Marshal(tool.Tool.OutputSchema)
		writeFields(&b, out)
	}
	return b.Bytes()
}

func writeFields(b *bytes.Buffer, schema []byte) {
	var s struct {
		Properties map[string]struct {
			Type        any    `json:"type"`
			Description string `json:"description"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(schema, &s)
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	b.WriteString("| field | type | required | description |\n|---|---|---|---|\n")
	for _, n := range names {
		p := s.Properties[n]
		req := "no"
		for _, r := range s.Required {
			if r == n {
				req = "yes"
			}
		}
		fmt.Fprintf(b, "| `%s` | %v | %s | %s |\n", n, p.Type, req, strings.ReplaceAll(p.Description, "|", "\\|"))
	}
}
