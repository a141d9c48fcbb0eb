package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	pt "github.com/warrenhq/warren/agent/provider/providertest"
)

// TestAgentRunCannotRaiseTheOperatorsLimits is an attack on the operator's
// policy through agent_run: a caller asks for 1,000 turns against a
// configured 3 while the scripted model asks for tools without end, and
// then asks for an expensive model that the config does not allow. The
// run stops at 3 model calls, and the expensive model is refused with the
// allowed list before any request reaches the model server.
func TestAgentRunCannotRaiseTheOperatorsLimits(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	var asked atomic.Int32
	model := pt.New(pt.OpenAI)
	model.Script = func(pt.Request) pt.Reply {
		// Tools forever (bounded only so that a failing run ends soon).
		if asked.Add(1) > 12 {
			return pt.Reply{Text: "gave up"}
		}
		return pt.Reply{Calls: []pt.Call{{Name: "shell_exec", Args: `{"command":"echo again"}`}}}
	}
	defer model.Close()
	cfg := `{"agent": {"model": "gpt-4.1-mini", "base_url": "` + model.BaseURL() + `", "api_key": "sk-config-key",
		"policy": {"approval": "auto", "max_turns": 3}}}`
	if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c := serveStdio(t, "--data-dir", data)

	res := c.call("agent_run", map[string]any{"prompt": "loop", "max_turns": 1000})
	out := structured(t, res)
	if n := len(model.Requests()); n != 3 || out["ended"] != "max_turns" || out["turns"] != float64(3) {
		t.Fatalf("a caller's max_turns 1000 against the operator's 3: %d model calls, ended %v after %v turns", n, out["ended"], out["turns"])
	}
	if !res.IsError || !strings.Contains(textOf(res), "can only lower it") {
		t.Errorf("a run stopped by its turn limit: isError %v, %s", res.IsError, textOf(res))
	}

	// Lowering is allowed: 2 turns.
	before := len(model.Requests())
	out = structured(t, c.call("agent_run", map[string]any{"prompt": "loop", "max_turns": 2}))
	if n := len(model.Requests()) - before; n != 2 || out["ended"] != "max_turns" {
		t.Errorf("max_turns 2 under the operator's 3: %d model calls, ended %v", n, out["ended"])
	}

	// A model the config does not allow is refused, naming what is allowed.
	before = len(model.Requests())
	c.fails("agent_run", map[string]any{"prompt": "loop", "model": "gpt-expensive"}, "gpt-4.1-mini")
	for _, r := range model.Requests() {
		if r.Raw["model"] == "gpt-expensive" {
			t.Fatal("the model server received a request for gpt-expensive")
		}
	}
	if len(model.Requests()) != before {
		t.Errorf("a refused run still called the model %d times", len(model.Requests())-before)
	}
	res = c.call("agent_run", map[string]any{"prompt": "loop", "model": "gpt-expensive"})
	if msg := textOf(res); !strings.Contains(msg, "gpt-expensive") || !strings.Contains(msg, "agent.models") {
		t.Errorf("the refusal should name the model and how the operator allows more: %s", msg)
	}
}

// An agent_run prompt over the limit is refused with the limit and what to
// do instead, before anything reaches the model or is kept.
func TestAgentRunPromptIsBounded(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	model := pt.New(pt.OpenAI)
	model.Script = func(pt.Request) pt.Reply { return pt.Reply{Text: "ok"} }
	defer model.Close()
	cfg := `{"agent": {"model": "gpt-4.1-mini", "base_url": "` + model.BaseURL() + `", "api_key": "sk-config-key",
		"policy": {"approval": "auto"}}}`
	if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c := serveStdio(t, "--data-dir", data)
	c.fails("agent_run", map[string]any{"prompt": strings.Repeat("p", 1<<20)}, "over agent_run's limit of 262144")
	if n := len(model.Requests()); n != 0 {
		t.Fatalf("the model server received %d requests for a refused prompt", n)
	}
	if out := structured(t, c.call("agent_run", map[string]any{"prompt": strings.Repeat("p", 1000)})); out["ended"] != "done" {
		t.Errorf("a prompt under the limit: %v", out)
	}
}
