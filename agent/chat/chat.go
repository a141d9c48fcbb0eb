// Package chat runs one agent turn inside a stored chat: it loads the
// transcript to continue, runs the loop, and saves the messages, events
// and totals. `warren chat` and the agent_run tool both go through it.
package chat

import (
	"context"
	"fmt"
	"strings"

	"github.com/warrenhq/warren/agent"
	"github.com/warrenhq/warren/agent/provider"
	"github.com/warrenhq/warren/agent/transcript"
	"github.com/warrenhq/warren/metering"
)

// Options select the chat and how to run it.
type Options struct {
	Store   *transcript.Store
	Agent   agent.Config
	BaseURL string
	// Resume continues this chat (its session and messages); "" starts a
	// new chat.
	Resume string
	// Fork starts a new chat with a copy of this one's messages (in the
	// session Agent.Session).
	Fork string
	// LogTranscripts is metering's log_transcripts: the event log of each
	// run keeps prompt, answer, tool arguments and results (redacted) only
	// when it is on. The messages that --resume replays are kept either way.
	LogTranscripts bool
}

// Session is an open chat.
type Session struct {
	Chat  *transcript.Chat
	Agent *agent.Agent
	store *transcript.Store
	log   bool // LogTranscripts
}

// Open loads or creates the chat and prepares its agent.
func Open(ctx context.Context, o Options) (*Session, error) {
	var history []provider.Message
	var totals agent.Totals
	var c *transcript.Chat
	switch {
	case o.Resume != "":
		old, err := o.Store.Get(ctx, o.Agent.User, o.Resume)
		if err != nil {
			return nil, fmt.Errorf("resume chat %s: %w", o.Resume, err)
		}
		if history, err = o.Store.Messages(ctx, old.ID); err != nil {
			return nil, err
		}
		c, totals = old, old.Totals
		if o.Agent.Session == "" {
			o.Agent.Session = old.Session
		}
	case o.Fork != "":
		old, err := o.Store.Get(ctx, o.Agent.User, o.Fork)
		if err != nil {
			return nil, fmt.Errorf("fork chat %s: %w", o.Fork, err)
		}
		if history, err = o.Store.Messages(ctx, old.ID); err != nil {
			return nil, err
		}
		c = &transcript.Chat{ID: transcript.NewID(), User: o.Agent.User, Session: o.Agent.Session, Parent: old.ID,
			Model: o.Agent.ModelName, BaseURL: o.BaseURL, Title: old.Title}
		if err := o.Store.Create(ctx, c, history); err != nil {
			return nil, err
		}
	}
	a, err := agent.New(ctx, o.Agent, history, totals)
	if err != nil {
		return nil, err
	}
	if c == nil {
		c = &transcript.Chat{ID: transcript.NewID(), User: o.Agent.User, Session: o.Agent.Session, Model: o.Agent.ModelName, BaseURL: o.BaseURL}
		if err := o.Store.Create(ctx, c, a.Messages); err != nil {
			return nil, err
		}
	}
	return &Session{Chat: c, Agent: a, store: o.Store, log: o.LogTranscripts}, nil
}

// Run runs one prompt, passes events to emit and saves the chat. Text
// deltas are saved merged, one event per run of text.
func (s *Session) Run(ctx context.Context, prompt string, emit func(agent.Event)) (agent.DoneInfo, error) {
	if s.Chat.Title == "" {
		s.Chat.Title = metering.Redact(title(prompt))
	}
	var events []agent.Event
	d := s.Agent.Run(ctx, prompt, func(e agent.Event) {
		if emit != nil {
			emit(e)
		}
		if n := len(events); n > 0 && e.Type == agent.EventText && events[n-1].Type == agent.EventText && events[n-1].Turn == e.Turn {
			events[n-1].Text += e.Text
			return
		}
		events = append(events, e)
	})
	events = s.private(events)
	s.Chat.Totals = s.Agent.Totals
	s.Chat.Ended = d.Reason
	// Save even when the caller cancelled: the transcript must survive.
	err := s.store.Save(context.WithoutCancel(ctx), s.Chat, s.Agent.Messages, events)
	return d, err
}

// private applies the log_transcripts setting to a run's events before
// they are stored. Off, text and progress events are dropped and the
// others keep their shape (tool names, sizes, usage, how the run ended)
// without their text; warren's own warnings and errors are kept. On,
// every text is passed through metering.Redact (merged text events are
// redacted whole, so a secret split over deltas is still found).
func (s *Session) private(events []agent.Event) []agent.Event {
	out := events[:0]
	for _, e := range events {
		text := func(v string) string {
			if s.log {
				return metering.Redact(v)
			}
			return ""
		}
		switch e.Type {
		case agent.EventText, agent.EventProgress:
			if !s.log {
				continue
			}
			e.Text = metering.Redact(e.Text)
		case agent.EventWarning, agent.EventError:
			e.Text = metering.Redact(e.Text)
		}
		if e.Call != nil {
			c := *e.Call
			c.Arguments = text(c.Arguments)
			e.Call = &c
		}
		if e.Result != nil {
			r := *e.Result
			r.Text = text(r.Text)
			e.Result = &r
		}
		if e.Done != nil {
			d := *e.Done
			d.Answer, d.Error = text(d.Answer), metering.Redact(d.Error)
			e.Done = &d
		}
		out = append(out, e)
	}
	return out
}

func title(prompt string) string {
	t := strings.Join(strings.Fields(prompt), " ")
	if len(t) > 60 {
		t = t[:57] + "..."
	}
	return t
}
