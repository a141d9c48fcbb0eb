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
}

// Session is an open chat.
type Session struct {
	Chat  *transcript.Chat
	Agent *agent.Agent
	store *transcript.Store
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
	return &Session{Chat: c, Agent: a, store: o.Store}, nil
}

// Run runs one prompt, passes events to emit and saves the chat. Text
// deltas are saved merged, one event per run of text.
func (s *Session) Run(ctx context.Context, prompt string, emit func(agent.Event)) (agent.DoneInfo, error) {
	if s.Chat.Title == "" {
		s.Chat.Title = title(prompt)
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
	s.Chat.Totals = s.Agent.Totals
	s.Chat.Ended = d.Reason
	// Save even when the caller cancelled: the transcript must survive.
	err := s.store.Save(context.WithoutCancel(ctx), s.Chat, s.Agent.Messages, events)
	return d, err
}

func title(prompt string) string {
	t := strings.Join(strings.Fields(prompt), " ")
	if len(t) > 60 {
		t = t[:57] + "..."
	}
	return t
}
