package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/agent"
	"github.com/warrenhq/warren/tasks"
)

// renewEvery is how often a chat working on a task renews its claim: a
// third of the lease, so that two renewals can fail before it ends.
const renewEvery = tasks.DefaultLease / 3

// keepClaim renews the session's claim on task at every tick (claiming a
// task one holds renews it) until stop is called. It gives up, and says
// why through onLost, when a renewal fails: the task was finished or
// reopened, or another session claimed it after the lease ran out.
func keepClaim(ctx context.Context, tools *agent.Tools, task, session string, ticks <-chan time.Time, onLost func(string)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticks:
			}
			args := map[string]any{"task_id": task}
			if session != "" {
				args["session_id"] = session
			}
			text, isErr, err := tools.Call(ctx, "task_claim", args, nil)
			if ctx.Err() != nil {
				return
			}
			if err != nil || isErr {
				if err != nil {
					text = err.Error()
				}
				if onLost != nil && !strings.Contains(text, " is done") {
					onLost(fmt.Sprintf("the claim on %s could not be renewed: %s", task, shorten(text, 200)))
				}
				return
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// claimTask claims task (an id or "next") for the session through the
// task tools, and returns its id and a description for the prompt.
func claimTask(ctx context.Context, tools *agent.Tools, task, session string) (string, string, error) {
	if task == "next" {
		text, isErr, err := tools.Call(ctx, "task_list", map[string]any{"status": "open"}, nil)
		if err != nil || isErr {
			return "", "", fmt.Errorf("list open tasks: %v%s", err, text)
		}
		var out struct {
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
		}
		if i := strings.Index(text, "{"); i >= 0 {
			json.Unmarshal([]byte(text[i:]), &out)
		}
		if len(out.Tasks) == 0 {
			ids := taskIDs(text)
			if len(ids) == 0 {
				return "", "", fmt.Errorf("--task next: no open task on the board")
			}
			task = ids[0]
		} else {
			task = out.Tasks[0].ID
		}
	}
	args := map[string]any{"task_id": task}
	if session != "" {
		args["session_id"] = session
	}
	text, isErr, err := tools.Call(ctx, "task_claim", args, nil)
	if err != nil {
		return "", "", fmt.Errorf("claim %s: %w", task, err)
	}
	if isErr {
		return "", "", fmt.Errorf("claim %s: %s", task, text)
	}
	return task, text, nil
}

// taskIDs finds T-N ids in a text rendering, in order.
func taskIDs(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\n' || r == ':' || r == ',' }) {
		if strings.HasPrefix(f, "T-") && len(f) > 2 {
			out = append(out, f)
		}
	}
	return out
}

// noteTask adds a note saying how the run ended; marking the task done is
// the model's call through task_update.
func noteTask(ctx context.Context, tools *agent.Tools, task, session string, d agent.DoneInfo) {
	note := fmt.Sprintf("warren chat stopped after %d turns: %s", d.Turns, d.Reason)
	if d.Error != "" {
		note += " (" + shorten(d.Error, 120) + ")"
	}
	args := map[string]any{"task_id": task, "note": note}
	if session != "" {
		args["session_id"] = session
	}
	tools.Call(ctx, "task_update", args, nil)
}
