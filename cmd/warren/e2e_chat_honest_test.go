package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pt "github.com/warrenhq/warren/agent/provider/providertest"
)

// noEmptyError fails when stderr holds a line "warren:" with nothing after
// it: every error printed says what went wrong.
func noEmptyError(t *testing.T, stderr string) {
	t.Helper()
	for _, line := range strings.Split(stderr, "\n") {
		if strings.TrimSpace(line) == "warren:" {
			t.Errorf("an error line without a message on stderr:\n%s", stderr)
		}
	}
}

// TestChatStreamCutShortIsNotAnAnswer: a model stream that ends before its
// finish_reason and [DONE] is retried; when it keeps being cut, chat -p
// exits 1 saying so (no partial answer on stdout) and agent_run is a tool
// error; when the retry succeeds, the answer is the whole one.
func TestChatStreamCutShortIsNotAnAnswer(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	full := "The complete answer, every word of it."
	cut := pt.Reply{Text: full, Cut: true}
	model := pt.New(pt.OpenAI, cut, cut, cut, cut, cut)
	defer model.Close()

	stdout, stderr, code := chatRun(t, data, model, "-p", "answer")
	if code != exitError || !strings.Contains(stderr, "ended before the answer was finished") {
		t.Errorf("every stream cut: exit %d, stderr:\n%s", code, stderr)
	}
	if strings.Contains(stdout, "The complete") || strings.TrimSpace(stdout) != "" {
		t.Errorf("a partial answer was printed as the answer: %q", stdout)
	}
	noEmptyError(t, stderr)
	if n := len(model.Requests()); n != 5 {
		t.Errorf("%d requests: want the first and 4 retries", n)
	}

	// The retry succeeds: the answer is the complete one.
	before := len(model.Requests())
	model.Push(cut, pt.Reply{Text: full})
	stdout, stderr, code = chatRun(t, data, model, "-p", "answer", "--output", "json")
	var res chatJSON
	json.Unmarshal([]byte(stdout), &res)
	if code != 0 || res.Answer != full || len(model.Requests())-before != 2 {
		t.Errorf("cut once, then whole: exit %d, answer %q, %d requests\n%s", code, res.Answer, len(model.Requests())-before, stderr)
	}

	// --output json: the error is in the JSON and on stderr, never empty.
	model.Push(cut, cut, cut, cut, cut)
	stdout, stderr, code = chatRun(t, data, model, "-p", "answer", "--output", "json")
	json.Unmarshal([]byte(stdout), &res)
	if code != exitError || res.Ended != "error" || !strings.Contains(stderr, "ended before the answer was finished") {
		t.Errorf("json: exit %d, %+v\n%s", code, res, stderr)
	}
	noEmptyError(t, stderr)

	// A model error with --output json: stderr says which, once (it was
	// a bare "warren: " line).
	model.Push(pt.Reply{Status: 400, Body: "unsupported value for temperature"})
	_, stderr, code = chatRun(t, data, model, "-p", "answer", "--output", "json")
	if code != exitError || strings.Count(stderr, "warren:") != 1 || !strings.Contains(stderr, "warren: model endpoint answered 400: unsupported value") {
		t.Errorf("model error with --output json: exit %d, stderr:\n%s", code, stderr)
	}
	noEmptyError(t, stderr)

	// agent_run: a failed agent is a failed call.
	cfg := `{"agent": {"model": "gpt-4.1-mini", "base_url": "` + model.BaseURL() + `", "api_key": "sk-config-key", "policy": {"approval": "auto"}}}`
	if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c := serveStdio(t, "--data-dir", data)
	model.Push(cut, cut, cut, cut, cut)
	r := c.call("agent_run", map[string]any{"prompt": "answer"})
	if !r.IsError || !strings.Contains(textOf(r), "ended before the answer was finished") {
		t.Errorf("agent_run with every stream cut: isError %v, %s", r.IsError, textOf(r))
	}
}

// TestChatDetectsDroppedStreamedToolCallsWithoutDoctor: against a server
// that drops tool calls when streaming (Ollama's way), with no 'chat
// doctor' first, the empty streamed reply is not taken for the answer:
// the request is sent again without streaming, the tool runs, and the
// profile remembers it, so the next chat streams no request with tools.
func TestChatDetectsDroppedStreamedToolCallsWithoutDoctor(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	model := pt.New(pt.Ollama,
		pt.Reply{Calls: []pt.Call{{Name: "write_file", Args: `{"path":"d.txt","content":"kept"}`}}},
		pt.Reply{Calls: []pt.Call{{Name: "write_file", Args: `{"path":"d.txt","content":"kept"}`}}},
		pt.Reply{Text: "Wrote d.txt."})
	defer model.Close()
	stdout, stderr, code := chatRun(t, data, model, "-p", "write d.txt")
	if code != 0 || stdout != "Wrote d.txt.\n" {
		t.Fatalf("exit %d, answer %q\n%s", code, stdout, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(data, "workspaces", "*", "d.txt"))
	if len(files) != 1 {
		t.Fatalf("d.txt in the workspaces: %v: the dropped tool call did not run", files)
	}
	if b, err := os.ReadFile(files[0]); err != nil || string(b) != "kept" {
		t.Errorf("d.txt %q %v", b, err)
	}
	if !strings.Contains(stderr, "dropped streamed tool calls") {
		t.Errorf("no warning on stderr:\n%s", stderr)
	}
	// Remembered: a new chat sends its requests with tools unstreamed.
	before := len(model.Requests())
	model.Push(pt.Reply{Text: "ok"})
	if _, stderr, code = chatRun(t, data, model, "-p", "hi"); code != 0 {
		t.Fatalf("second chat: exit %d\n%s", code, stderr)
	}
	for _, r := range model.Requests()[before:] {
		if r.Stream && len(r.Tools) > 0 {
			t.Error("a request with tools was streamed after the run had found that the server drops them")
		}
	}

	// A model that really answers nothing (streamed or not) is an error,
	// not an empty answer with exit 0.
	model.Push(pt.Reply{}, pt.Reply{})
	stdout, stderr, code = chatRun(t, data, model, "-p", "hi")
	if code != exitError || !strings.Contains(stderr, "answered with nothing") {
		t.Errorf("empty answer: exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	noEmptyError(t, stderr)
}
