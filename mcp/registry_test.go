package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// update rewrites snapshots and generated docs instead of comparing them.
var update = os.Getenv("UPDATE_TOOLSNAPS") == "true"

func TestEveryToolSetsAllFourAnnotations(t *testing.T) {
	for _, tool := range Registry() {
		a := tool.Tool.Annotations
		if a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil {
			t.Errorf("%s: every annotation must be explicit, got %+v", tool.Tool.Name, a)
		}
		if a.Title == "" || tool.Tool.Description == "" {
			t.Errorf("%s: title and description are required", tool.Tool.Name)
		}
		if *a.ReadOnlyHint && *a.DestructiveHint {
			t.Errorf("%s: read-only and destructive at once", tool.Tool.Name)
		}
		if tool.Toolset == "" {
			t.Errorf("%s: no toolset", tool.Tool.Name)
		}
	}
}

// TestToolSnapshots compares each tool's schema with __toolsnaps__/<name>.snap:
// schema drift shows up as a diff in review. UPDATE_TOOLSNAPS=true rewrites
// them; a missing snapshot fails.
func TestToolSnapshots(t *testing.T) {
	for _, tool := range Registry() {
		got, err := json.MarshalIndent(tool.Tool, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		path := filepath.Join("__toolsnaps__", tool.Tool.Name+".snap")
		if update {
			if err := os.MkdirAll("__toolsnaps__", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: no snapshot (%v): run UPDATE_TOOLSNAPS=true go test ./mcp/ and review the new file", tool.Tool.Name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: schema changed; if intended, run UPDATE_TOOLSNAPS=true go test ./mcp/ and commit the diff\ngot:\n%s", tool.Tool.Name, got)
		}
	}
}

func TestSelectTools(t *testing.T) {
	all := Registry()
	got, err := selectTools(all, []string{"files"})
	if err != nil || len(got) != 3 {
		t.Fatalf("files: %d tools, %v", len(got), err)
	}
	if _, err := selectTools(all, []string{"nope"}); err == nil {
		t.Fatal("unknown toolset accepted")
	}
	if got, _ := selectTools(all, nil); len(got) != len(all) {
		t.Fatal("no toolsets should mean all")
	}
}

// TestInputSchemasHaveNoNullableTypes: a type array with "null" in any
// tool's input schema (["null","object"], which Go pointers produce) is
// what strict clients and the MCP Inspector warn about as unportable. An
// optional argument is a plain type left out of required.
func TestInputSchemasHaveNoNullableTypes(t *testing.T) {
	var walk func(tool, at string, v any)
	walk = func(tool, at string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if types, ok := x["type"].([]any); ok {
				for _, ty := range types {
					if ty == "null" {
						t.Errorf("%s: input schema %s has type %v: make it a plain optional field", tool, at, types)
					}
				}
			}
			for k, e := range x {
				walk(tool, at+"/"+k, e)
			}
		case []any:
			for i, e := range x {
				walk(tool, fmt.Sprintf("%s/%d", at, i), e)
			}
		}
	}
	for _, tool := range Registry() {
		raw, err := json.Marshal(tool.Tool)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if m["inputSchema"] == nil {
			t.Errorf("%s: no input schema", tool.Tool.Name)
		}
		walk(tool.Tool.Name, "#", m["inputSchema"])
	}
}
