package agent_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/ncruces/go-sqlite3/driver"
	"github.com/rs/zerolog"

	"github.com/warrenhq/warren/agent"
	"github.com/warrenhq/warren/agent/provider"
	pt "github.com/warrenhq/warren/agent/provider/providertest"
	"github.com/warrenhq/warren/mcp"
	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sessions"
)

// world is a real warren server (real SQLite, real jails) with one
// session of alice's, and an in-process MCP client to it.
type world struct {
	db      *sql.DB
	meter   *metering.Meter
	mgr     *sessions.Manager
	tools   *agent.Tools
	session *sessions.Session
}

func newWorld(t testing.TB, mode sessions.Mode, source string) *world {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	// Jails run as another uid when the tests run as root: t.TempDir's
	// parent is 0700.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "warren.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := sessions.NewStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := sessions.NewManager(store, sessions.Config{DataDir: dir, AllowLocalSources: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close(context.Background()) })
	meter, err := metering.Open(ctx, db, metering.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcp.New(mcp.Options{Sessions: mgr, Meter: meter, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	s, err := mgr.Create(ctx, "alice", sessions.CreateOptions{Mode: mode, Source: source})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := agent.ConnectInProcess(ctx, srv.MCPServer(), func(ctx context.Context) context.Context { return mcp.WithUser(ctx, "alice") }, "cli")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tools.Close() })
	return &world{db: db, meter: meter, mgr: mgr, tools: tools, session: s}
}

func (w *world) agent(t testing.TB, s *pt.Server, p agent.Policy, approve agent.Approver) *agent.Agent {
	t.Helper()
	prof := provider.DefaultProfile(s.BaseURL(), "gpt-4.1-mini")
	if s.Style == pt.Ollama {
		prof.StreamToolCalls, prof.ToolCallIDs, prof.UsageInStream = false, false, false
	}
	a, err := agent.New(context.Background(), agent.Config{Model: &provider.Client{BaseURL: s.BaseURL(), Profile: prof}, ModelName: "gpt-4.1-mini",
		Tools: w.tools, Policy: p, User: "alice", Session: w.session.ID, Client: "cli", Meter: w.meter, Approve: approve}, nil, agent.Totals{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func collect(events *[]agent.Event) func(agent.Event) {
	return func(e agent.Event) { *events = append(*events, e) }
}

func TestAgentWritesAndRunsInARealJail(t *testing.T) {
	for _, style := range []pt.Style{pt.OpenAI, pt.Ollama} {
		w := newWorld(t, sessions.ModeEmpty, "")
		s := pt.New(style,
			pt.Reply{Text: "Writing the file.", Calls: []pt.Call{{Name: "write_file", Args: `{"path":"hello.txt","content":"hi from the agent\n"}`}}},
			pt.Reply{Calls: []pt.Call{{Name: "shell_exec", Args: `{"command":"cat hello.txt; echo made > made.txt"}`}, {Name: "read_file", Args: `{"path":"made.txt"}`}}},
			pt.Reply{Text: "All done."})
		defer s.Close()
		var ev []agent.Event
		d := w.agent(t, s, agent.Policy{}, nil).Run(context.Background(), "make a file", collect(&ev))
		for _, e := range ev {
			if e.Type == agent.EventToolResult {
				t.Logf("%s: %s", e.Result.Name, e.Result.Text)
			}
		}
		if d.Reason != agent.EndDone || d.Answer != "All done." || d.Turns != 3 {
			t.Fatalf("style %d: done %+v, events %+v", style, d, ev)
		}
		got, err := os.ReadFile(filepath.Join(w.session.Workspace, "made.txt"))
		if err != nil || string(got) != "made\n" {
			t.Fatalf("made.txt in the workspace: %q %v", got, err)
		}
		reqs := s.Requests()
		third := reqs[2].Messages
		var results []string
		for _, m := range third {
			if m["role"] == "tool" {
				c, ok := m["content"].(string)
				if !ok {
					t.Fatalf("tool message content is not a string: %#v", m["content"])
				}
				results = append(results, c)
			}
		}
		if len(results) != 3 || !strings.Contains(results[1], "hi from the agent") || !strings.Contains(results[2], "made") {
			t.Errorf("style %d: tool results sent back %q", style, results)
		}
		// The two calls of one message ran in order: cat before read.
		var order []string
		for _, e := range ev {
			if e.Type == agent.EventToolResult {
				order = append(order, e.Result.Name)
			}
		}
		if strings.Join(order, ",") != "write_file,shell_exec,read_file" {
			t.Errorf("order %v", order)
		}
		for _, tool := range reqs[0].Tools {
			if tool == "agent_run" || tool == "session_control" {
				t.Errorf("the agent was offered %s", tool)
			}
		}
	}
}

func TestMalformedArgumentsGoBackAsAToolError(t *testing.T) {
	w := newWorld(t, sessions.ModeEmpty, "")
	s := pt.New(pt.OpenAI,
		pt.Reply{Calls: []pt.Call{{Name: "shell_exec", Args: `{"command": "echo hi"`}}},
		pt.Reply{Calls: []pt.Call{{Name: "shell_exec", Args: `{"command":"echo fixed"}`}}},
		pt.Reply{Text: "ok"})
	defer s.Close()
	var ev []agent.Event
	d := w.agent(t, s, agent.Policy{}, nil).Run(context.Background(), "go", collect(&ev))
	if d.Reason != agent.EndDone {
		t.Fatalf("%+v", d)
	}
	msgs := s.Requests()[1].Messages
	last, _ := msgs[len(msgs)-1]["content"].(string)
	if !strings.Contains(last, "not a valid JSON object") {
		t.Errorf("the model was told %q", last)
	}
}

func TestDeniedApprovalGoesBackToTheModel(t *testing.T) {
	w := newWorld(t, sessions.ModeEmpty, "")
	s := pt.New(pt.OpenAI,
		pt.Reply{Calls: []pt.Call{{Name: "shell_exec", Args: `{"command":"echo no > denied.txt"}`}}},
		pt.Reply{Text: "Understood."})
	defer s.Close()
	asked := 0
	deny := func(context.Context, agent.CallInfo, agent.ToolInfo) (agent.Decision, error) {
		asked++
		return agent.Deny, nil
	}
	d := w.agent(t, s, agent.Policy{Approval: agent.ApprovalAsk}, deny).Run(context.Background(), "go", nil)
	if d.Reason != agent.EndDone || asked != 1 {
		t.Fatalf("%+v asked %d", d, asked)
	}
	if _, err := os.Stat(filepath.Join(w.session.Workspace, "denied.txt")); err == nil {
		t.Error("a denied command ran")
	}
	msgs := s.Requests()[1].Messages
	if c, _ := msgs[len(msgs)-1]["content"].(string); !strings.Contains(c, "declined") {
		t.Errorf("tool result %q", c)
	}
	// Without anybody to ask, the run ends with the approval reason.
	s.Push(pt.Reply{Calls: []pt.Call{{Name: "write_file", Args: `{"path":"x","content":"y"}`}}})
	d = w.agent(t, s, agent.Policy{Approval: agent.ApprovalAsk}, nil).Run(context.Background(), "go", nil)
	if d.Reason != agent.EndApproval {
		t.Errorf("without an approver: %+v", d)
	}
}

func TestReadOnlyOffersOnlyReadOnlyTools(t *testing.T) {
	w := newWorld(t, sessions.ModeEmpty, "")
	s := pt.New(pt.OpenAI, pt.Reply{Text: "hi"})
	defer s.Close()
	w.agent(t, s, agent.Policy{Approval: agent.ApprovalReadOnly}, nil).Run(context.Background(), "go", nil)
	for _, tool := range s.Requests()[0].Tools {
		if tool == "shell_exec" || tool == "write_file" || tool == "edit_file" {
			t.Errorf("read-only offered %s", tool)
		}
	}
}

func TestBudgetStopsBeforeTheCallThatWouldExceedIt(t *testing.T) {
	w := newWorld(t, sessions.ModeEmpty, "")
	s := pt.New(pt.OpenAI, pt.Reply{Text: "sizing"}, pt.Reply{Calls: []pt.Call{{Name: "shell_exec", Args: `{"command":"echo 1"}`}}}, pt.Reply{Text: "never"})
	defer s.Close()
	sizing := w.agent(t, s, agent.Policy{}, nil)
	sizing.Run(context.Background(), "go", nil)
	// A budget the first call fits in and the second does not.
	budget := sizing.Totals.Tokens()*3/2 + 50
	a2 := w.agent(t, s, agent.Policy{MaxTokens: budget}, nil)
	d := a2.Run(context.Background(), "go", nil)
	if d.Reason != agent.EndBudget {
		t.Fatalf("%+v", d)
	}
	if n := len(s.Requests()); n != 2 {
		t.Errorf("%d model calls, want 1: the budget must stop the loop before the second", n-1)
	}
	if a2.Totals.Tokens() > budget {
		t.Errorf("spent %d tokens, over the budget", a2.Totals.Tokens())
	}
	// The call that was made is a usage record of the session and client.
	for _, g := range []metering.GroupBy{metering.GroupClient, metering.GroupSession, metering.GroupModel} {
		rep, err := w.meter.Report(context.Background(), metering.ReportQuery{User: "alice", GroupBy: g})
		if err != nil {
			t.Fatal(err)
		}
		want := map[metering.GroupBy]string{metering.GroupClient: "cli", metering.GroupSession: w.session.ID, metering.GroupModel: "gpt-4.1-mini"}[g]
		found := false
		for _, r := range rep.Rows {
			found = found || (r.Key == want && r.InputTokens > 0 && r.CostMicros > 0)
		}
		if !found {
			t.Errorf("no model usage under %s %q: %+v", g, want, rep.Rows)
		}
	}
}

func TestContextLengthDropsOldOutputsAndRetriesOnce(t *testing.T) {
	w := newWorld(t, sessions.ModeEmpty, "")
	s := pt.New(pt.OpenAI,
		pt.Reply{Calls: []pt.Call{{Name: "shell_exec", Args: `{"command":"seq 1 400"}`}}},
		pt.Reply{Status: 400, Body: "This model's maximum context length is 100 tokens"},
		pt.Reply{Text: "ok"})
	defer s.Close()
	var ev []agent.Event
	d := w.agent(t, s, agent.Policy{}, nil).Run(context.Background(), "go", collect(&ev))
	if d.Reason != agent.EndDone {
		t.Fatalf("%+v", d)
	}
	msgs := s.Requests()[2].Messages
	if c, _ := msgs[len(msgs)-1]["content"].(string); !strings.Contains(c, "dropped to fit") {
		t.Errorf("retried with %q", c)
	}
}

func TestLongResultsAreCappedHeadAndTail(t *testing.T) {
	w := newWorld(t, sessions.ModeEmpty, "")
	s := pt.New(pt.OpenAI, pt.Reply{Calls: []pt.Call{{Name: "shell_exec", Args: `{"command":"echo FIRST; seq 1 20000; echo LAST"}`}}}, pt.Reply{Text: "ok"})
	defer s.Close()
	w.agent(t, s, agent.Policy{}, nil).Run(context.Background(), "go", nil)
	msgs := s.Requests()[1].Messages
	c, _ := msgs[len(msgs)-1]["content"].(string)
	if len(c) > 17<<10 || !strings.Contains(c, "FIRST") || !strings.Contains(c, "LAST") || !strings.Contains(c, "bytes cut from the middle") {
		t.Errorf("capped result of %d bytes: head %q tail %q", len(c), c[:min(60, len(c))], c[max(0, len(c)-60):])
	}
}

// A server that reports no usage (Ollama's streams): the agent estimates
// it, and the usage record says it is an estimate.
func TestUsageTheServerDidNotSendIsRecordedAsEstimated(t *testing.T) {
	w := newWorld(t, sessions.ModeEmpty, "")
	for _, tc := range []struct {
		style     pt.Style
		estimated int64
	}{{pt.OpenAI, 0}, {pt.Ollama, 1}} {
		s := pt.New(tc.style, pt.Reply{Text: "hello there"})
		defer s.Close()
		a, err := agent.New(context.Background(), agent.Config{Model: &provider.Client{BaseURL: s.BaseURL(), Profile: provider.DefaultProfile(s.BaseURL(), "m")},
			ModelName: "m-" + s.BaseURL(), Tools: w.tools, User: "alice", Session: w.session.ID, Client: "cli", Meter: w.meter}, nil, agent.Totals{})
		if err != nil {
			t.Fatal(err)
		}
		if d := a.Run(context.Background(), "hi", nil); d.Reason != agent.EndDone {
			t.Fatalf("style %d: %+v", tc.style, d)
		}
		rep, err := w.meter.Report(context.Background(), metering.ReportQuery{User: "alice", GroupBy: metering.GroupModel})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range rep.Rows {
			if r.Key != "m-"+s.BaseURL() {
				continue
			}
			found = true
			if r.Records != 1 || r.EstimatedRecords != tc.estimated || (tc.estimated == 1) != (r.EstimatedTokens > 0) {
				t.Errorf("style %d: %+v, want %d estimated", tc.style, r.Totals, tc.estimated)
			}
		}
		if !found {
			t.Errorf("style %d: no usage record for the model", tc.style)
		}
	}
}
