package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	pt "github.com/warrenhq/warren/agent/provider/providertest"
)

// chatRun runs 'warren chat' with the scripted model's URL and returns
// stdout, stderr and the exit code.
func chatRun(t *testing.T, data string, model *pt.Server, args ...string) (string, string, int) {
	t.Helper()
	all := append([]string{"chat", "--data-dir", data, "--model", "gpt-4.1-mini", "--base-url", model.BaseURL()}, args...)
	cmd := exec.Command(warrenBin, all...)
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=sk-test-key-never-logged")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String()+errb.String(), "sk-test-key") {
		t.Error("the API key was printed")
	}
	return out.String(), errb.String(), code
}

type chatJSON struct {
	ChatID    string `json:"chat_id"`
	SessionID string `json:"session_id"`
	Answer    string `json:"answer"`
	Turns     int    `json:"turns"`
	Ended     string `json:"ended"`
	Usage     struct {
		InputTokens int64 `json:"input_tokens"`
		Estimated   bool  `json:"estimated"`
	} `json:"usage"`
}

func TestChatPromptRunsToolsInAJailAndResumes(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	model := pt.New(pt.OpenAI,
		pt.Reply{Status: 429, RetryAfter: "0", Body: "rate limited"},
		pt.Reply{Text: "Writing.", Calls: []pt.Call{{Name: "write_file", Args: `{"path":"notes/a.txt","content":"alpha\n"}`}}},
		pt.Reply{Calls: []pt.Call{{Name: "shell_exec", Args: `{"command":"cat notes/a.txt > b.txt && echo beta >> b.txt"}`}}},
		pt.Reply{Text: "Made **b.txt**."},
	)
	defer model.Close()
	stdout, stderr, code := chatRun(t, data, model, "-p", "make b.txt", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var res chatJSON
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("json output %q: %v", stdout, err)
	}
	if res.Answer != "Made **b.txt**." || res.Ended != "done" || res.Turns != 3 || res.ChatID == "" || res.SessionID == "" || res.Usage.InputTokens == 0 {
		t.Fatalf("result %+v", res)
	}
	b, err := os.ReadFile(filepath.Join(data, "workspaces", res.SessionID, "b.txt"))
	if err != nil || string(b) != "alpha\nbeta\n" {
		t.Fatalf("b.txt in the session's workspace: %q %v", b, err)
	}

	// Resume: the same transcript goes back to the model, in the same session.
	model.Push(pt.Reply{Text: "It has two lines."})
	stdout, _, code = chatRun(t, data, model, "--resume", res.ChatID, "-p", "how many lines?", "--output", "json")
	var again chatJSON
	json.Unmarshal([]byte(stdout), &again)
	if code != 0 || again.ChatID != res.ChatID || again.SessionID != res.SessionID {
		t.Fatalf("resume: exit %d, %+v", code, again)
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1].Messages
	if len(last) < 8 || last[1]["content"] != "make b.txt" {
		t.Errorf("the resumed request does not carry the earlier transcript: %d messages", len(last))
	}

	// ls shows the chat with its tokens; export renders it.
	ls, _, _ := chatRunPlain(t, data, "chat", "ls")
	if !strings.Contains(ls, res.ChatID) || !strings.Contains(ls, "make b.txt") {
		t.Errorf("chat ls:\n%s", ls)
	}
	md, _, code := chatRunPlain(t, data, "chat", "export", res.ChatID, "--format", "md")
	if code != 0 || !strings.Contains(md, "## You\n\nmake b.txt") || !strings.Contains(md, "write_file") {
		t.Errorf("export md:\n%s", md)
	}
	js, _, _ := chatRunPlain(t, data, "chat", "export", res.ChatID, "--format", "json")
	var exp map[string]any
	if err := json.Unmarshal([]byte(js), &exp); err != nil {
		t.Errorf("export json: %v", err)
	}
	// Usage rows exist for the session and the client cli.
	rep, _, _ := chatRunPlain(t, data, "usage", "report", "--group-by", "client", "--format", "json")
	if !strings.Contains(rep, `"key": "cli"`) && !strings.Contains(rep, `"key":"cli"`) {
		t.Errorf("usage by client:\n%s", rep)
	}
}

func chatRunPlain(t *testing.T, data string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(warrenBin, append(args, "--data-dir", data)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), errb.String(), ee.ExitCode()
	}
	return out.String(), errb.String(), 0
}

func TestChatStreamJSONAndExitCodes(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	call := pt.Reply{Calls: []pt.Call{{Name: "shell_exec", Args: `{"command":"echo hi"}`}}}
	model := pt.New(pt.OpenAI, call)
	defer model.Close()
	stdout, stderr, code := chatRun(t, data, model, "-p", "go", "--output", "stream-json", "--max-turns", "1")
	if code != 3 {
		t.Fatalf("turn limit: exit %d, want 3\n%s\n%s", code, stdout, stderr)
	}
	var types []string
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var e struct {
			Type string `json:"type"`
			Done *struct {
				Reason string `json:"reason"`
			} `json:"done"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		types = append(types, e.Type)
		if e.Type == "done" && e.Done.Reason != "max_turns" {
			t.Errorf("done %+v", e.Done)
		}
	}
	got := strings.Join(types, ",")
	if !strings.HasPrefix(got, "usage,tool_call,") || !strings.Contains(got, "tool_result") || !strings.HasSuffix(got, "done") {
		t.Errorf("events %s", got)
	}

	// A budget smaller than the first call: exit 4 before any call.
	before := len(model.Requests())
	_, _, code = chatRun(t, data, model, "-p", "go", "--max-tokens", "10")
	if code != 4 || len(model.Requests()) != before {
		t.Errorf("budget: exit %d, %d calls made", code, len(model.Requests())-before)
	}

	// A bound session defaults to ask; without a terminal the run ends 5.
	dir := jailDir(t)
	model.Push(pt.Reply{Calls: []pt.Call{{Name: "write_file", Args: `{"path":"x.txt","content":"no"}`}}})
	_, stderr, code = chatRun(t, data, model, "-p", "go", "--workspace", dir)
	if code != 5 || !strings.Contains(stderr, "needs approval") {
		t.Errorf("approval without a terminal: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.txt")); err == nil {
		t.Error("the unapproved write happened")
	}
	// Bad usage: exit 2.
	if _, _, code = chatRun(t, data, model, "-p", "go", "--output", "yaml"); code != 2 {
		t.Errorf("bad --output: exit %d", code)
	}
}

func TestChatDoctorThenChatOnEachServer(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	for _, tc := range []struct {
		style pt.Style
		want  []string
		code  int
	}{
		{pt.Ollama, []string{"looks like ollama", "dropped", "missing", "object"}, 0},
		{pt.OpenAI, []string{"looks like openai", "streamed tool calls:    ok", "parallel_tool_calls:    yes"}, 0},
		{pt.VLLM, []string{"fix: vLLM", "--enable-auto-tool-choice"}, 1},
		{pt.LlamaCpp, []string{"fix: llama.cpp", "--jinja"}, 1},
	} {
		model := pt.New(tc.style,
			pt.Reply{Calls: []pt.Call{{Name: "write_file", Args: `{"path":"d.txt","content":"doctor"}`}}},
			pt.Reply{Text: "ok"})
		out, _, code := chatRun(t, data, model, "doctor")
		if code != tc.code {
			t.Errorf("style %d: doctor exit %d\n%s", tc.style, code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("style %d: doctor output lacks %q:\n%s", tc.style, w, out)
			}
		}
		if tc.code == 0 {
			stdout, stderr, code := chatRun(t, data, model, "-p", "write d.txt", "--output", "json")
			var res chatJSON
			json.Unmarshal([]byte(stdout), &res)
			if code != 0 || res.Ended != "done" {
				t.Errorf("style %d: chat after doctor: exit %d %s %s", tc.style, code, stdout, stderr)
			}
			if b, err := os.ReadFile(filepath.Join(data, "workspaces", res.SessionID, "d.txt")); err != nil || string(b) != "doctor" {
				t.Errorf("style %d: d.txt %q %v", tc.style, b, err)
			}
			for _, r := range model.Requests() {
				if tc.style == pt.Ollama && r.Stream && len(r.Tools) > 0 {
					t.Errorf("a request with tools was streamed to Ollama after doctor found it drops them")
				}
			}
		}
		model.Close()
	}
}

func TestChatAgainstARemoteServerWithAToken(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	srv := serveHTTP(t, "--data-dir", data)
	token := createToken(t, data, "bob")
	tokFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokFile, []byte(token+"\n"), 0o600)
	model := pt.New(pt.OpenAI,
		pt.Reply{Calls: []pt.Call{{Name: "shell_exec", Args: `{"command":"echo remote > r.txt; pwd"}`}}},
		pt.Reply{Text: "done remotely"})
	defer model.Close()
	local := jailDir(t)
	stdout, stderr, code := chatRun(t, local, model, "--server", srv.url, "--token-file", tokFile, "--approval", "auto", "-p", "go", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	matches, _ := filepath.Glob(filepath.Join(data, "workspaces", "*", "r.txt"))
	if len(matches) != 1 {
		t.Fatalf("r.txt in the server's workspaces: %v", matches)
	}
	// Without the token the server refuses.
	_, stderr, code = chatRun(t, local, model, "--server", srv.url, "-p", "go")
	if code == 0 {
		t.Errorf("no token: exit 0\n%s", stderr)
	}
}
