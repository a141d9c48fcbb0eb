package provider

import (
	"strconv"
	"strings"
)

// callDelta is one tool-call fragment as a server sent it, after
// openai-go decoded it: the fields that servers disagree on are kept with
// their presence.
type callDelta struct {
	index    int64
	hasIndex bool
	id       string
	name     string
	// args is the JSON text of the arguments; object says the server sent
	// a JSON object instead of the standard string.
	args   string
	object bool
}

// accumulator assembles tool calls from deltas. Servers differ: OpenAI
// sends index and id; Ollama and some others send neither, or send each
// call whole; arguments arrive split, whole, or as an object.
type accumulator struct {
	// sawID and sawObject record what the server sent, for Probe.
	sawID, sawObject bool
	text             strings.Builder
	calls            []*ToolCall
	byIdx            map[int64]*ToolCall
	last             *ToolCall
}

func (a *accumulator) add(d callDelta) {
	var call *ToolCall
	switch {
	case d.hasIndex:
		if a.byIdx == nil {
			a.byIdx = map[int64]*ToolCall{}
		}
		call = a.byIdx[d.index]
		if call == nil {
			call = a.start(d.id)
			a.byIdx[d.index] = call
		}
	case d.id != "":
		for _, c := range a.calls {
			if c.ID == d.id {
				call = c
			}
		}
		if call == nil {
			call = a.start(d.id)
		}
	default:
		// No index, no id: a name starts a new call unless the current
		// one has none yet; anything else continues the current call.
		if a.last == nil || (d.name != "" && a.last.Name != "") {
			call = a.start("")
		} else {
			call = a.last
		}
	}
	a.sawID = a.sawID || d.id != ""
	if d.id != "" && call.ID == "" {
		call.ID = d.id
	}
	if d.name != "" && call.Name == "" {
		call.Name = d.name
	}
	if d.object {
		a.sawObject = true
		call.Arguments = d.args // an object is always whole
	} else {
		call.Arguments += d.args
	}
	a.last = call
}

func (a *accumulator) start(id string) *ToolCall {
	c := &ToolCall{ID: id}
	a.calls = append(a.calls, c)
	return c
}

func (a *accumulator) response(r Response) Response {
	r.Message = a.message()
	r.idsPresent, r.argsType = a.sawID, "string"
	if a.sawObject {
		r.argsType = "object"
	}
	return r
}

func (a *accumulator) message() Message {
	m := Message{Role: "assistant", Content: a.text.String()}
	for i, c := range a.calls {
		if c.Name == "" {
			continue
		}
		if c.ID == "" {
			// Never send an empty id back: servers match results by it.
			c.ID = "call_" + strconv.Itoa(i+1)
		}
		m.ToolCalls = append(m.ToolCalls, *c)
	}
	return m
}

// StripThink removes <think>…</think> blocks (reasoning that some local
// models print) so that they are shown but never replayed to the model.
func StripThink(s string) string {
	for {
		i := strings.Index(s, "<think>")
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], "</think>")
		if j < 0 {
			return strings.TrimSpace(s[:i])
		}
		s = s[:i] + strings.TrimLeft(s[i+j+len("</think>"):], "\n ")
	}
}
