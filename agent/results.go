package agent

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// DefaultResultCap is how much of a tool result goes back to the model.
const DefaultResultCap = 16 << 10

// maxImagesKept bounds the pictures a conversation holds: every request
// sends them all again, and each may be 5 MiB.
const maxImagesKept = 4

// keepLatestImages drops all but the latest n pictures of the
// conversation, leaving a note where they were.
func (a *Agent) keepLatestImages(n int) {
	seen := 0
	for i := len(a.Messages) - 1; i >= 0; i-- {
		m := &a.Messages[i]
		if len(m.Images) == 0 {
			continue
		}
		keep := max(0, min(len(m.Images), n-seen))
		seen += len(m.Images)
		if keep < len(m.Images) {
			m.Content += fmt.Sprintf(" [%d older image(s) dropped: a conversation keeps the latest %d]", len(m.Images)-keep, n)
			m.Images = m.Images[len(m.Images)-keep:]
			if keep == 0 {
				m.Images = nil
			}
		}
	}
}

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

// dropOldOutputs replaces the older half of the tool outputs with a note,
// once per run. It reports whether anything was dropped.
func (r *run) dropOldOutputs() bool {
	var idx []int
	for i, m := range r.a.Messages {
		if m.Role == "tool" && len(m.Content) > 200 {
			idx = append(idx, i)
		}
	}
	// Pictures are the biggest parts: all but the latest go first.
	last := -1
	for i, m := range r.a.Messages {
		if len(m.Images) > 0 {
			last = i
		}
	}
	dropped := false
	for i := range r.a.Messages {
		if m := &r.a.Messages[i]; len(m.Images) > 0 && i != last {
			m.Content += fmt.Sprintf(" [%d image(s) dropped to fit the context window]", len(m.Images))
			m.Images, dropped = nil, true
		}
	}
	if len(idx) == 0 {
		return dropped
	}
	n := max(1, (len(idx)+1)/2)
	for _, i := range idx[:n] {
		r.a.Messages[i].Content = fmt.Sprintf("[output dropped to fit the context window: %d bytes]", len(r.a.Messages[i].Content))
	}
	return true
}

// Compact replaces the outputs of tool calls older than the last keep user
// prompts with a note, and returns how many it dropped.
func (a *Agent) Compact(keep int) int {
	users := 0
	n := 0
	for i := len(a.Messages) - 1; i >= 0; i-- {
		m := &a.Messages[i]
		if m.Role == "user" {
			users++
		}
		if users >= keep && m.Role == "tool" && !strings.HasPrefix(m.Content, "[output dropped") {
			m.Content = fmt.Sprintf("[output dropped by /compact: %d bytes]", len(m.Content))
			n++
		}
	}
	return n
}
