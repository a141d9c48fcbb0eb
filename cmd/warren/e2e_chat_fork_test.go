package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pt "github.com/warrenhq/warren/agent/provider/providertest"
)

// --fork: a second approach starts from the first one's files and
// transcript, in its own session; the first session is left as it was.
func TestChatForkCopiesTheWorkspaceAndTranscript(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	model := pt.New(pt.OpenAI,
		pt.Reply{Calls: []pt.Call{{Name: "write_file", Args: `{"path":"plan.md","content":"approach one\n"}`}}},
		pt.Reply{Text: "Wrote plan.md."},
		pt.Reply{Calls: []pt.Call{{Name: "shell_exec", Args: `{"command":"echo approach two > plan.md; echo extra > b.txt"}`}}},
		pt.Reply{Text: "Tried another way."},
	)
	defer model.Close()
	stdout, stderr, code := chatRun(t, data, model, "-p", "first approach", "--output", "json")
	var first chatJSON
	if err := json.Unmarshal([]byte(stdout), &first); err != nil || code != 0 {
		t.Fatalf("first chat: exit %d %v\n%s\n%s", code, err, stdout, stderr)
	}
	stdout, stderr, code = chatRun(t, data, model, "--fork", first.ChatID, "-p", "second approach", "--output", "json")
	var second chatJSON
	if err := json.Unmarshal([]byte(stdout), &second); err != nil || code != 0 {
		t.Fatalf("fork: exit %d %v\n%s\n%s", code, err, stdout, stderr)
	}
	if second.ChatID == first.ChatID || second.SessionID == first.SessionID || second.SessionID == "" {
		t.Fatalf("fork ids: first %+v, second %+v", first, second)
	}
	ws := func(s, name string) string {
		b, err := os.ReadFile(filepath.Join(data, "workspaces", s, name))
		if err != nil {
			return "(missing)"
		}
		return string(b)
	}
	if got := ws(second.SessionID, "plan.md"); got != "approach two\n" {
		t.Errorf("plan.md in the fork: %q", got)
	}
	if got := ws(first.SessionID, "plan.md"); got != "approach one\n" {
		t.Errorf("plan.md in the original: %q", got)
	}
	if got := ws(first.SessionID, "b.txt"); got != "(missing)" {
		t.Errorf("b.txt appeared in the original: %q", got)
	}
	// The fork's model saw the first chat's conversation.
	reqs := model.Requests()
	var seen []string
	for _, m := range reqs[2].Messages {
		if c, _ := m["content"].(string); c != "" {
			seen = append(seen, c)
		}
	}
	if all := strings.Join(seen, "|"); !strings.Contains(all, "first approach") || !strings.Contains(all, "second approach") {
		t.Errorf("the fork's first request: %s", all)
	}
	out, _, _ := chatRun(t, data, model, "ls")
	if !strings.Contains(out, first.ChatID) || !strings.Contains(out, second.ChatID) {
		t.Errorf("chat ls:\n%s", out)
	}
	if _, stderr, code = chatRun(t, data, model, "--fork", "c-nosuchchat", "-p", "x"); code != 2 || !strings.Contains(stderr, "no such chat") {
		t.Errorf("fork of a missing chat: exit %d %s", code, stderr)
	}
}
