package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/warrenhq/warren/tasks"
)

// TaskListInput is the input of task_list.
type TaskListInput struct {
	Status string `json:"status,omitempty" jsonschema:"only tasks with this status: open, in_progress, blocked or done"`
	Owner  string `json:"owner,omitempty" jsonschema:"only tasks owned by this user (with or without the leading @)"`
}

// TaskListOutput is the output of task_list.
type TaskListOutput struct {
	Path  string     `json:"path" jsonschema:"the board's TASKS.md on the server's host"`
	Tasks []TaskView `json:"tasks" jsonschema:"the matching tasks, by id"`
	// Warning is set when the list comes from the board's database
	// because TASKS.md could not be synced (unreadable, unwritable, or a
	// full disk): the list is still right.
	Warning string `json:"warning,omitempty" jsonschema:"set when TASKS.md could not be synced; the list comes from the board's database and is still right"`
}

// TaskClaimInput is the input of task_claim.
type TaskClaimInput struct {
	TaskID    string `json:"task_id" jsonschema:"the task to claim, e.g. T-12"`
	SessionID string `json:"session_id,omitempty" jsonschema:"the session that works on the task; omitted: your default session"`
}

// TaskUpdateInput is the input of task_update.
type TaskUpdateInput struct {
	TaskID    string `json:"task_id" jsonschema:"the task to update, e.g. T-12"`
	Status    string `json:"status,omitempty" jsonschema:"the new status: open, in_progress, blocked or done (done requires holding the claim and releases it)"`
	Note      string `json:"note,omitempty" jsonschema:"a one-line note, appended with a timestamp and your name"`
	Link      string `json:"link,omitempty" jsonschema:"the commit or pull request that completes the task; omitted with status done: the session's last session_push (its pull request or branch), if it pushed"`
	SessionID string `json:"session_id,omitempty" jsonschema:"the session that holds the claim; omitted: your default session"`
}

// TaskAddInput is the input of task_add.
type TaskAddInput struct {
	Title string `json:"title" jsonschema:"what the task is, on one line"`
}

// TaskOutput is the output of task_claim, task_update and task_add.
type TaskOutput struct {
	Task TaskView `json:"task" jsonschema:"the task after the change"`
	// Warning is set when the change is saved on the board but TASKS.md
	// could not be rewritten: the call succeeded and must not be retried.
	Warning string `json:"warning,omitempty" jsonschema:"set when the change is saved but the file could not be written yet; do not retry"`
}

// TaskView, TaskNote and TaskClaim are the task as clients show it; the
// CLI prints the same (tasks.View).
type (
	TaskView  = tasks.View
	TaskNote  = tasks.NoteView
	TaskClaim = tasks.ClaimView
)

func taskList(d *deps) Tool {
	t := mcp.NewTool("task_list",
		mcp.WithDescription("List the tasks of the shared board (docs/TASKS.md), optionally by status or owner. "+
			"Hand edits of the file are merged first. A task held by someone shows its claim."),
		mcp.WithInputSchema[TaskListInput](),
		mcp.WithOutputSchema[TaskListOutput](),
		// Not read-only: listing first merges hand edits of TASKS.md into
		// the board and rewrites the file.
		annotations("List tasks", false, false, true, false),
	)
	h := typedHandler(func(ctx context.Context, _ mcp.CallToolRequest, in TaskListInput) (result[TaskListOutput], error) {
		if _, err := callerOf(ctx); err != nil {
			return result[TaskListOutput]{}, err
		}
		list, err := d.tasks.List(ctx, tasks.Filter{Status: tasks.Status(in.Status), Owner: in.Owner})
		if err != nil && (list == nil || !errors.Is(err, tasks.ErrNotWritten)) {
			return result[TaskListOutput]{}, err
		}
		out := TaskListOutput{Path: d.tasks.Path(), Tasks: make([]TaskView, len(list))}
		if err != nil {
			out.Warning = err.Error()
		}
		var b strings.Builder
		for i, task := range list {
			out.Tasks[i] = viewTask(task)
			b.WriteString(renderTask(out.Tasks[i]))
			b.WriteByte('\n')
		}
		if len(list) == 0 {
			b.WriteString("no tasks match; add one with task_add\n")
		}
		if out.Warning != "" {
			b.WriteString("warning: " + out.Warning + "\n")
		}
		return result[TaskListOutput]{Out: out, Text: b.String()}, nil
	})
	return Tool{Toolset: "tasks", Tool: t, Handler: h}
}

func taskClaim(d *deps) Tool {
	t := mcp.NewTool("task_claim",
		mcp.WithDescription("Claim a task for your session: a lease (30 minutes by default) that only you can "+
			"extend, by claiming again before it ends. Of two agents claiming at once exactly one wins; the other "+
			"gets an error naming the holder. Claiming makes you the owner and moves an open task to in_progress."),
		mcp.WithInputSchema[TaskClaimInput](),
		mcp.WithOutputSchema[TaskOutput](),
		annotations("Claim a task", false, false, true, false),
	)
	h := typedHandler(func(ctx context.Context, _ mcp.CallToolRequest, in TaskClaimInput) (result[TaskOutput], error) {
		holder, err := d.holder(ctx, in.SessionID)
		if err != nil {
			return result[TaskOutput]{}, err
		}
		task, err := d.tasks.Claim(ctx, in.TaskID, holder, 0)
		return taskResult(task, err, "claimed")
	})
	return Tool{Toolset: "tasks", Tool: t, Handler: h}
}

func taskUpdate(d *deps) Tool {
	t := mcp.NewTool("task_update",
		mcp.WithDescription("Change a task's status, append a note, or record the commit/PR link. While a claim is "+
			"live only its holder may update the task; status done requires holding the claim, and releases it."),
		mcp.WithInputSchema[TaskUpdateInput](),
		mcp.WithOutputSchema[TaskOutput](),
		annotations("Update a task", false, true, false, false),
	)
	h := typedHandler(func(ctx context.Context, _ mcp.CallToolRequest, in TaskUpdateInput) (result[TaskOutput], error) {
		holder, err := d.holder(ctx, in.SessionID)
		if err != nil {
			return result[TaskOutput]{}, err
		}
		change := tasks.Change{Status: tasks.Status(in.Status), Note: in.Note, Link: in.Link}
		if change.Status == tasks.StatusDone && change.Link == "" && d.git != nil {
			// The session's last push is what completes the task.
			if r, ok, err := d.git.Store.LastPush(ctx, holder.Session); err == nil && ok && len(r.Link()) <= 2000 {
				change.Link = r.Link()
			}
		}
		task, err := d.tasks.Update(ctx, in.TaskID, change, holder)
		return taskResult(task, err, "updated")
	})
	return Tool{Toolset: "tasks", Tool: t, Handler: h}
}

func taskAdd(d *deps) Tool {
	t := mcp.NewTool("task_add",
		mcp.WithDescription("Add an open task to the board with the next free id; it is written to TASKS.md."),
		mcp.WithInputSchema[TaskAddInput](),
		mcp.WithOutputSchema[TaskOutput](),
		annotations("Add a task", false, false, false, false),
	)
	h := typedHandler(func(ctx context.Context, _ mcp.CallToolRequest, in TaskAddInput) (result[TaskOutput], error) {
		if _, err := callerOf(ctx); err != nil {
			return result[TaskOutput]{}, err
		}
		task, err := d.tasks.Add(ctx, in.Title)
		return taskResult(task, err, "added")
	})
	return Tool{Toolset: "tasks", Tool: t, Handler: h}
}

// holder is the caller working in one of their sessions; another user's
// session is "not found".
func (d *deps) holder(ctx context.Context, sessionID string) (tasks.Holder, error) {
	user, err := callerOf(ctx)
	if err != nil {
		return tasks.Holder{}, err
	}
	s, err := d.sessions.Get(ctx, user, sessionID)
	if err != nil {
		return tasks.Holder{}, err
	}
	return tasks.Holder{User: user, Session: s.ID}, nil
}

// taskResult turns a board change into a tool result. A change saved on
// the board whose file write failed is a success with a warning: an error
// would make the model retry, and a retried task_add adds the task twice.
func taskResult(task tasks.Task, err error, verb string) (result[TaskOutput], error) {
	out := TaskOutput{}
	if err != nil {
		if !errors.Is(err, tasks.ErrNotWritten) || task.ID == "" {
			return result[TaskOutput]{}, err
		}
		out.Warning = err.Error()
	}
	out.Task = viewTask(task)
	text := verb + " " + renderTask(out.Task)
	if out.Warning != "" {
		text += "\nwarning: " + out.Warning
	}
	return result[TaskOutput]{Out: out, Text: text}, nil
}

// viewTask converts a board task for the tools.
func viewTask(t tasks.Task) TaskView { return tasks.ViewOf(t) }

// renderTask is one line a model reads when it ignores structuredContent.
func renderTask(v TaskView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s [%s] %s", v.ID, v.Status, v.Title)
	if v.Owner != "" {
		fmt.Fprintf(&b, " @%s", v.Owner)
	}
	if v.Claim != nil {
		fmt.Fprintf(&b, " (claimed by %s, session %s, until %s)", v.Claim.User, v.Claim.SessionID, v.Claim.ExpiresAt)
	}
	if v.Link != "" {
		fmt.Fprintf(&b, " link %s", v.Link)
	}
	if len(v.Notes) > 0 {
		fmt.Fprintf(&b, "; %d note(s), last: %s", len(v.Notes), v.Notes[len(v.Notes)-1].Text)
	}
	if v.Conflict {
		b.WriteString(" [CONFLICT: changed in the file and on the board]")
	}
	return b.String()
}
