package mcp

import (
	"strings"
	"testing"
)

// File contents never enter the activity feed: they are logged by size;
// long arguments are cut; a command is shown as typed.
func TestSummarizeArgs(t *testing.T) {
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"shell_exec", map[string]any{"command": "cd sub; export A=1", "session_id": "s-1"}, "cd sub; export A=1"},
		{"write_file", map[string]any{"path": "a.txt", "content": "private text", "session_id": "s-1"}, "content=(12 bytes) path=a.txt"},
		{"edit_file", map[string]any{"path": "a", "old_text": "xx", "new_text": "yyy"}, "new_text=(3 bytes) old_text=(2 bytes) path=a"},
		{"task_claim", map[string]any{"task_id": "T-3"}, "task_id=T-3"},
		{"read_file", map[string]any{"path": strings.Repeat("d/", 150), "limit": 5}, "limit=5 path=" + strings.Repeat("d/", 92) + "d…(+115 bytes)"},
		{"read_file", map[string]any{"path": strings.Repeat("é", 150)}, "path=" + strings.Repeat("é", 92) + "…(+116 bytes)"},
		{"shell_exec", map[string]any{"command": strings.Repeat("c", 1<<20)}, strings.Repeat("c", 4077) + "…(+1044499 bytes)"},
	} {
		if got := summarizeArgs(tc.tool, tc.args); got != tc.want {
			t.Errorf("%s %v: %q, want %q", tc.tool, tc.args, got, tc.want)
		}
	}
}
