package tasks

import "time"

// View is a task as every client shows it: the task tools' structured
// output and `warren task ls --json` print exactly this, so that scripts
// written against one work with the other.
type View struct {
	ID       string     `json:"id" jsonschema:"the task's stable id, e.g. T-12"`
	Title    string     `json:"title" jsonschema:"what the task is"`
	Status   string     `json:"status" jsonschema:"open, in_progress, blocked or done"`
	Owner    string     `json:"owner,omitempty" jsonschema:"the user who owns the task"`
	Link     string     `json:"link,omitempty" jsonschema:"the commit or pull request recorded on completion"`
	Notes    []NoteView `json:"notes" jsonschema:"the task's history, oldest first"`
	Claim    *ClaimView `json:"claim,omitempty" jsonschema:"the live claim on the task, if any"`
	Conflict bool       `json:"conflict" jsonschema:"changed both in TASKS.md and on the board: changes are refused until someone settles it with 'warren task sync'"`
}

// NoteView is one line of a task's history.
type NoteView struct {
	At   string `json:"at" jsonschema:"when, UTC, RFC 3339"`
	By   string `json:"by,omitempty" jsonschema:"who wrote it"`
	Text string `json:"text" jsonschema:"the note"`
}

// ClaimView is a live lease on a task.
type ClaimView struct {
	User      string `json:"user" jsonschema:"the user holding the claim"`
	SessionID string `json:"session_id" jsonschema:"the session holding the claim"`
	ExpiresAt string `json:"expires_at" jsonschema:"when the lease ends unless renewed by claiming again (UTC, RFC 3339)"`
}

// ViewOf returns t as clients show it.
func ViewOf(t Task) View {
	v := View{ID: t.ID, Title: t.Title, Status: string(t.Status), Owner: t.Owner, Link: t.Link,
		Notes: make([]NoteView, len(t.Notes)), Conflict: t.Conflict}
	for i, n := range t.Notes {
		v.Notes[i] = NoteView{At: n.At.UTC().Format(time.RFC3339), By: n.By, Text: n.Text}
	}
	if t.Claim != nil {
		v.Claim = &ClaimView{User: t.Claim.Holder.User, SessionID: t.Claim.Holder.Session,
			ExpiresAt: t.Claim.ExpiresAt.UTC().Format(time.RFC3339)}
	}
	return v
}
