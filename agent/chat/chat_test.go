package chat_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/ncruces/go-sqlite3/driver"

	"github.com/warrenhq/warren/agent"
	"github.com/warrenhq/warren/agent/chat"
	"github.com/warrenhq/warren/agent/provider"
	pt "github.com/warrenhq/warren/agent/provider/providertest"
	"github.com/warrenhq/warren/agent/transcript"
)

// echoTools is a hand-written ToolRunner: one read-only tool that answers
// with its arguments.
type echoTools struct{}

var _ agent.ToolRunner = echoTools{}

func (echoTools) List(context.Context) ([]agent.ToolInfo, error) {
	return []agent.ToolInfo{{Name: "echo", Schema: json.RawMessage(`{"type":"object"}`), ReadOnly: true}}, nil
}

func (echoTools) Call(_ context.Context, _ string, args map[string]any, _ func(string)) (string, bool, error) {
	b, _ := json.Marshal(args)
	return "echoed " + string(b), false, nil
}

const secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"

// The run's event log follows metering's log_transcripts: off, it keeps
// no prompt, answer, arguments or results; on, it keeps them redacted.
// The messages that --resume replays are kept whole either way.
func TestEventLogFollowsLogTranscripts(t *testing.T) {
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "warren.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store, err := transcript.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	for _, logOn := range []bool{false, true} {
		s := pt.New(pt.OpenAI,
			pt.Reply{Text: "calling echo", Calls: []pt.Call{{Name: "echo", Args: `{"key":"` + secret + `"}`}}},
			pt.Reply{Text: "the answer mentions " + secret})
		cfg := agent.Config{Model: &provider.Client{BaseURL: s.BaseURL(), Profile: provider.DefaultProfile(s.BaseURL(), "m")},
			ModelName: "m", Tools: echoTools{}, User: "alice", Session: "s-1"}
		sess, err := chat.Open(context.Background(), chat.Options{Store: store, Agent: cfg, LogTranscripts: logOn})
		if err != nil {
			t.Fatal(err)
		}
		d, err := sess.Run(context.Background(), "my prompt with "+secret, nil)
		s.Close()
		if err != nil || d.Reason != agent.EndDone {
			t.Fatalf("log %v: %v %+v", logOn, err, d)
		}
		events, err := store.Events(context.Background(), sess.Chat.ID)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(events)
		log := string(b)
		if strings.Contains(log, secret) {
			t.Errorf("log %v: the secret is in the event log: %s", logOn, log)
		}
		if strings.Contains(sess.Chat.Title, secret) {
			t.Errorf("log %v: the secret is in the title %q", logOn, sess.Chat.Title)
		}
		kept := strings.Contains(log, "the answer mentions") && strings.Contains(log, "[REDACTED]")
		if logOn != kept {
			t.Errorf("log %v: text kept %v in %s", logOn, kept, log)
		}
		if !strings.Contains(log, `"tool_call"`) || !strings.Contains(log, `"usage"`) || !strings.Contains(log, `"done"`) {
			t.Errorf("log %v: the event log lost its shape: %s", logOn, log)
		}
		msgs, err := store.Messages(context.Background(), sess.Chat.ID)
		if err != nil {
			t.Fatal(err)
		}
		b, _ = json.Marshal(msgs)
		if strings.Count(string(b), secret) < 3 {
			t.Errorf("log %v: the messages --resume replays lost text: %s", logOn, b)
		}
	}
}
