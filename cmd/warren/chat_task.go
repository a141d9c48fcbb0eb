package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/warrenhq/warren/agent"
)

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
