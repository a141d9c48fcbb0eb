package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	pt "github.com/warrenhq/warren/agent/provider/providertest"
)

// TestConsoleAgentPanelAsksForApproval: the agent panel runs agent_run in
// the session against a scripted model; its destructive call comes to the
// page as an approval request, which a click approves; the command really
// ran in the jail, and the events and the answer are on the page.
func TestConsoleAgentPanelAsksForApproval(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	model := pt.New(pt.OpenAI,
		pt.Reply{Text: "I will write the file.", Calls: []pt.Call{{Name: "shell_exec", Args: `{"command":"echo approved > agent.txt"}`}}},
		pt.Reply{Text: "The file is written."})
	defer model.Close()
	b, session := openAgentPanel(t, data, model, `{"approval": "ask"}`)
	b.run("ask the agent", chromedp.SendKeys("#agent-prompt", "write agent.txt"), chromedp.Click("#agent-run"))
	b.waitJS("the approval request", `!!document.querySelector(".approval #approve")`)
	if q := b.text(".approval p"); !strings.Contains(q, "shell_exec") || !strings.Contains(q, "agent.txt") {
		t.Fatalf("the approval asks %q", q)
	}
	b.screenshots("agent")
	b.run("approve", chromedp.Click(".approval #approve"))
	b.waitJS("the answer", `(document.querySelector(".agent-answer") || {}).textContent?.includes("The file is written.")`)
	if log := b.text(".agent-log"); !strings.Contains(log, "I will write the file.") || !strings.Contains(log, "shell_exec") {
		t.Fatalf("the agent's events on the page: %q", log)
	}
	if got, err := os.ReadFile(filepath.Join(data, "workspaces", session, "agent.txt")); err != nil || string(got) != "approved\n" {
		t.Fatalf("agent.txt in the workspace: %q %v", got, err)
	}
}

// TestConsoleHidesTheAgentWithoutAModel: a server with no model has no
// agent_run, and the session page offers no agent tab.
func TestConsoleHidesTheAgentWithoutAModel(t *testing.T) {
	needJail(t)
	srv := startConsole(t, jailDir(t), "127.0.0.1:0")
	c := connectHTTP(t, srv.mcpURL(), srv.token)
	session := c.exec("true")["session_id"].(string)
	b := signedIn(t, srv)
	b.run("open the session", chromedp.Navigate(srv.base+"/#/s/"+session))
	b.waitJS("the tabs", `document.querySelectorAll('[role="tab"]').length > 0`)
	var tabs string
	b.eval(`[...document.querySelectorAll('[role="tab"]')].map((t) => t.textContent).join(",")`, &tabs)
	if tabs != "Activity,Shell,Files,Diff" {
		t.Fatalf("tabs %q", tabs)
	}
}

// TestConsoleAgentFailedRunKeepsItsChat: a run that ends in an error (here
// the operator's turn limit, which agent_run reports as isError) still
// belongs to its chat: the next prompt on the page continues it, so the
// model sees the first prompt in the second request.
func TestConsoleAgentFailedRunKeepsItsChat(t *testing.T) {
	needJail(t)
	model := pt.New(pt.OpenAI,
		pt.Reply{Calls: []pt.Call{{Name: "shell_exec", Args: `{"command":"echo one"}`}}},
		pt.Reply{Text: "Continued."})
	defer model.Close()
	b, _ := openAgentPanel(t, jailDir(t), model, `{"approval": "auto", "max_turns": 1}`)
	b.run("the first prompt", chromedp.SendKeys("#agent-prompt", "the first prompt"), chromedp.Click("#agent-run"))
	b.waitJS("the run's error", `(document.querySelector(".agent") || {}).textContent?.includes("max_turns")`)
	b.waitJS("the run button back", `!document.querySelector("#agent-run").disabled`)
	b.run("the second prompt", chromedp.Evaluate(`document.querySelector("#agent-prompt").value = ""`, nil), chromedp.SendKeys("#agent-prompt", "go on"), chromedp.Click("#agent-run"))
	b.waitJS("the answer", `(document.querySelector(".agent-answer") || {}).textContent?.includes("Continued.")`)
	reqs := model.Requests()
	last := reqs[len(reqs)-1]
	var history strings.Builder
	for _, m := range last.Messages {
		history.WriteString(fmt.Sprint(m["content"]))
	}
	if !strings.Contains(history.String(), "the first prompt") {
		t.Fatalf("the second run started a new chat: its request holds %q", history.String())
	}
}

// openAgentPanel serves a console whose agent uses the scripted model
// under the given policy (JSON), makes a session, and opens its agent
// panel in a signed-in browser.
func openAgentPanel(t *testing.T, data string, model *pt.Server, policy string) (*browser, string) {
	t.Helper()
	cfg := `{"agent": {"model": "gpt-4.1-mini", "base_url": "` + model.BaseURL() + `", "api_key": "sk-config-key", "policy": ` + policy + `}}`
	if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startConsole(t, data, "127.0.0.1:0")
	c := connectHTTP(t, srv.mcpURL(), srv.token)
	session := c.exec("true")["session_id"].(string)
	b := signedIn(t, srv)
	b.run("open the agent panel", chromedp.Navigate(srv.base+"/#/s/"+session+"/agent"))
	b.waitJS("the agent panel", `!!document.querySelector("#agent-prompt")`)
	return b, session
}
