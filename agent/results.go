package agent

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// DefaultResultCap is how much of a tool result goes back to the model.
const DefaultResultCap = 16 << 10

// capResult keeps the head and the tail of s within limit bytes and says
// in words what was cut: errors are usually at the end, context at the
// start.
func capResult(s string, limit int) (string, bool) {
	if limit <= 0 || len(s) <= limit {
		return s, false
	}
	head := limit * 2 / 3
	tail := limit - head
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	start := len(s) - tail
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	cut := start - head
	return s[:head] + fmt.Sprintf("\n\n[… %d bytes cut from the middle of this %d-byte result; the start and the end are shown …]\n\n", cut, len(s)) +
		s[start:], true
}

// toolsetOf names the toolset of a warren tool by its name.
func toolsetOf(name string) string {
	switch {
	case strings.HasPrefix(name, "shell_"):
		return "shell"
	case name == "read_file" || name == "write_file" || name == "edit_file":
		return "files"
	case strings.HasPrefix(name, "session_"):
		return "sessions"
	case strings.HasPrefix(name, "task_"):
		return "tasks"
	case strings.HasPrefix(name, "usage_"):
		return "usage"
	case strings.HasPrefix(name, "agent_"):
		return "agent"
	}
	return ""
}
