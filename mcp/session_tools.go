package mcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/workspace"
)

// SessionCreateInput is the input of session_create.
type SessionCreateInput struct {
	Source string `json:"source,omitempty" jsonschema:"a git URL: https (over HTTP: public hosts only); ssh, git, http, file:// and paths of the server (a local repository or directory) where the server allows them; omitted: an empty workspace"`
	Mode   string `json:"mode,omitempty" jsonschema:"clone, bind (work in a directory of the server in place; never a URL) or empty; omitted: inferred (URLs and repositories are cloned, other directories bound)"`
	Ref    string `json:"ref,omitempty" jsonschema:"branch, tag or commit to check out (clone only); omitted: the default branch"`
	Name   string `json:"name,omitempty" jsonschema:"a label for people, at most 100 characters"`
	// Identity is a git identity of the caller's (identity_list).
	Identity string `json:"identity,omitempty" jsonschema:"clone with this git identity of yours (identity_list): its SSH key for ssh URLs, its token for https; session_push then pushes with it"`
	// Network is the session's network policy; see network_tools.go.
	Network *NetworkPolicy `json:"network,omitempty" jsonschema:"the jail's network: mode none (default: loopback only), allowlist (HTTP and HTTPS through warren's proxy to the hosts in allow) or host (the server's whole network, when the server allows it)"`
}

// SessionView describes one session.
type SessionView struct {
	SessionID string        `json:"session_id" jsonschema:"pass it as session_id to every other tool"`
	Name      string        `json:"name" jsonschema:"the session's label"`
	State     string        `json:"state" jsonschema:"active, paused, archived (read-only) or deleted (its workspace and records are then removed; its usage records stay)"`
	Mode      string        `json:"mode" jsonschema:"clone, bind or empty"`
	Source    string        `json:"source" jsonschema:"what the workspace was made from"`
	Ref       string        `json:"ref" jsonschema:"the requested branch, tag or commit"`
	Commit    string        `json:"commit" jsonschema:"the commit a clone checked out"`
	Cwd       string        `json:"cwd" jsonschema:"the shell's saved working directory"`
	Running   bool          `json:"running" jsonschema:"the session's jailed shell is running now (it starts on the next command otherwise)"`
	Network   NetworkPolicy `json:"network" jsonschema:"the jail's network policy"`
	CreatedAt string        `json:"created_at" jsonschema:"RFC 3339"`
	UpdatedAt string        `json:"updated_at" jsonschema:"RFC 3339"`
	// Filled by session_list only.
	LastActivity string `json:"last_activity,omitempty" jsonschema:"session_list: when a tool was last called in the session, by any client (RFC 3339)"`
	DiskBytes    int64  `json:"disk_bytes,omitempty" jsonschema:"session_list: bytes its workspace and home use, as the disk quota counts them (a bound directory counts its home only; measured at most every --quota-interval)"`
}

// SessionListInput is the input of session_list.
type SessionListInput struct {
	IncludeDeleted bool `json:"include_deleted,omitempty" jsonschema:"also list sessions being deleted (a delete that could not remove their files; the next server start finishes it): deleted sessions are otherwise gone"`
}

// SessionListOutput is the output of session_list.
type SessionListOutput struct {
	Sessions []SessionView `json:"sessions" jsonschema:"your sessions, oldest first"`
}

// SessionControlInput is the input of session_control.
type SessionControlInput struct {
	SessionID string         `json:"session_id" jsonschema:"the session to change"`
	Action    string         `json:"action" jsonschema:"pause (stop the shell, keep everything), resume, archive (read-only for good), delete (remove the workspace; a bound directory is kept) or network (set the network policy given in network)"`
	Network   *NetworkPolicy `json:"network,omitempty" jsonschema:"with action network: the new policy; a new allowlist applies to the next connection, a new mode restarts the shell (cwd and exports kept)"`
}

// SessionDiffInput is the input of session_diff.
type SessionDiffInput struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"the session to compare; omitted: your default session"`
	MaxBytes  int    `json:"max_bytes,omitempty" jsonschema:"cap on the patch text (default 262144)"`
}

// SessionDiffOutput is the output of session_diff.
type SessionDiffOutput struct {
	SessionID string                 `json:"session_id" jsonschema:"the session compared"`
	Base      string                 `json:"base" jsonschema:"the base snapshot the workspace is compared with (taken when the session was created)"`
	Patch     string                 `json:"patch" jsonschema:"unified diff; binary files are named, not shown"`
	Truncated bool                   `json:"truncated" jsonschema:"the patch was cut at max_bytes; files still lists every change"`
	Files     []workspace.FileChange `json:"files" jsonschema:"each changed path: added, modified, deleted or renamed, with line counts; note says why a file's lines are not in the patch (a large file, .git's object store summarised)"`
	Notes     []string               `json:"notes,omitempty" jsonschema:"what the diff summarises or leaves out: files recorded by size only, entries skipped (sockets, FIFOs, other file systems), files past the summary's cap"`
}

const defaultDiffBytes = 256 << 10

// The session a result names, for metering.
func (v SessionView) inSession() string       { return v.SessionID }
func (o SessionDiffOutput) inSession() string { return o.SessionID }

func (d *deps) view(i sessions.Info) SessionView {
	return SessionView{SessionID: i.ID, Name: i.Name, State: string(i.State), Mode: string(i.Mode), Source: i.Source,
		Ref: i.Ref, Commit: i.BaseCommit, Cwd: i.Cwd, Running: d.sessions.Running(i.ID), Network: networkView(i.Network),
		CreatedAt: i.CreatedAt.Format(time.RFC3339), UpdatedAt: i.UpdatedAt.Format(time.RFC3339)}
}

func renderSession(v SessionView) string {
	s := fmt.Sprintf("session %s (%s, %s", v.SessionID, v.State, v.Mode)
	if v.Source != "" {
		s += " of " + v.Source
	}
	if v.Commit != "" {
		s += " at " + v.Commit[:min(12, len(v.Commit))]
	}
	s += ")"
	if v.Name != "" {
		s += " " + v.Name
	}
	return s + ", cwd " + v.Cwd + ", network " + renderNetwork(v.Network)
}

func sessionCreate(d *deps) Tool {
	t := mcp.NewTool("session_create",
		mcp.WithDescription("Create a workspace session: clone a git repository (shallow where possible), bind a "+
			"directory of the server, or start empty. Returns the session_id to pass to the other tools. Clone "+
			"progress streams as progress notifications when the request carries a progressToken."),
		mcp.WithInputSchema[SessionCreateInput](),
		mcp.WithOutputSchema[SessionView](),
		annotations("Create a session", false, false, false, true),
	)
	h := typedHandler(func(ctx context.Context, req mcp.CallToolRequest, in SessionCreateInput) (result[SessionView], error) {
		user, err := callerOf(ctx)
		if err != nil {
			return result[SessionView]{}, err
		}
		p := newProgress(ctx, d.notes, req)
		opts := sessions.CreateOptions{Source: in.Source, Mode: sessions.Mode(in.Mode),
			Ref: in.Ref, Name: in.Name, Progress: progressWriter{p}, Network: in.Network.policy()}
		var notices []string
		link, err := d.cloneIdentity(ctx, user, in.Identity, &opts, func(m string) {
			notices = append(notices, m)
			fmt.Fprintln(opts.Progress, m)
		})
		if err != nil {
			p.finish()
			return result[SessionView]{}, err
		}
		s, err := d.sessions.Create(ctx, user, opts)
		p.finish()
		if err != nil {
			return result[SessionView]{}, err
		}
		if err := link(ctx, s.ID); err != nil {
			return result[SessionView]{}, err
		}
		v := d.view(s.Info())
		text := "created " + renderSession(v)
		for _, n := range notices {
			text += "\n" + n
		}
		return result[SessionView]{Out: v, Text: text}, nil
	})
	return Tool{Toolset: "sessions", Tool: t, Handler: h}
}

// progressWriter streams clone progress as progress notifications.
type progressWriter struct{ p *progress }

func (w progressWriter) Write(b []byte) (int, error) {
	w.p.add(append([]byte(nil), b...))
	return len(b), nil
}

func sessionList(d *deps) Tool {
	t := mcp.NewTool("session_list",
		mcp.WithDescription("List your sessions with their state. Starts nothing."),
		mcp.WithInputSchema[SessionListInput](),
		mcp.WithOutputSchema[SessionListOutput](),
		annotations("List sessions", true, false, true, false),
	)
	h := typedHandler(func(ctx context.Context, _ mcp.CallToolRequest, in SessionListInput) (result[SessionListOutput], error) {
		user, err := callerOf(ctx)
		if err != nil {
			return result[SessionListOutput]{}, err
		}
		list, err := d.sessions.List(ctx, user, in.IncludeDeleted)
		if err != nil {
			return result[SessionListOutput]{}, err
		}
		out := SessionListOutput{Sessions: []SessionView{}}
		var b strings.Builder
		for _, i := range list {
			v := d.view(i)
			d.listExtras(ctx, user, &v)
			out.Sessions = append(out.Sessions, v)
			b.WriteString(renderSession(v) + "\n")
		}
		if len(list) == 0 {
			b.WriteString("no sessions yet: create one with session_create, or just use the tools without session_id\n")
		}
		return result[SessionListOutput]{Out: out, Text: b.String()}, nil
	})
	return Tool{Toolset: "sessions", Tool: t, Handler: h}
}

func sessionControl(d *deps) Tool {
	t := mcp.NewTool("session_control",
		mcp.WithDescription("Change a session's state: pause (save the shell's state, snapshot the workspace, stop "+
			"the shell; commands and writes are refused until resume), resume, archive (snapshot, then read-only for "+
			"good) or delete (remove the workspace, except a bound directory, which is the user's own); or its "+
			"network policy (action network)."),
		mcp.WithInputSchema[SessionControlInput](),
		mcp.WithOutputSchema[SessionView](),
		annotations("Pause, resume, archive or delete a session", false, true, false, false),
	)
	h := typedHandler(func(ctx context.Context, _ mcp.CallToolRequest, in SessionControlInput) (result[SessionView], error) {
		user, err := callerOf(ctx)
		if err != nil {
			return result[SessionView]{}, err
		}
		if in.SessionID == "" {
			return result[SessionView]{}, errorf("session_id is required: session_control never acts on your default session implicitly")
		}
		var s *sessions.Session
		if in.Action == "network" {
			if in.Network == nil {
				return result[SessionView]{}, errorf("action network needs network: {mode, allow}")
			}
			s, err = d.sessions.SetNetwork(ctx, user, in.SessionID, *in.Network.policy())
		} else {
			s, err = d.sessions.Control(ctx, user, in.SessionID, in.Action)
		}
		if err != nil {
			return result[SessionView]{}, err
		}
		v := d.view(s.Info())
		return result[SessionView]{Out: v, Text: renderSession(v)}, nil
	})
	return Tool{Toolset: "sessions", Tool: t, Handler: h}
}

func sessionDiff(d *deps) Tool {
	t := mcp.NewTool("session_diff",
		mcp.WithDescription("Show what changed in a session's workspace since it was created: a unified diff and a "+
			"per-file summary of everything, .git and .gitignore'd files included; binary and large files (over 1 MiB) "+
			"are named with their sizes, not shown."),
		mcp.WithInputSchema[SessionDiffInput](),
		mcp.WithOutputSchema[SessionDiffOutput](),
		annotations("Diff a session against its base", true, false, true, false),
	)
	h := typedHandler(func(ctx context.Context, _ mcp.CallToolRequest, in SessionDiffInput) (result[SessionDiffOutput], error) {
		user, err := callerOf(ctx)
		if err != nil {
			return result[SessionDiffOutput]{}, err
		}
		if in.MaxBytes < 0 {
			return result[SessionDiffOutput]{}, errorf("max_bytes must be a positive number of bytes")
		}
		limit := in.MaxBytes
		if limit == 0 {
			limit = defaultDiffBytes
		}
		s, diff, err := d.sessions.Diff(ctx, user, in.SessionID, limit)
		if err != nil {
			return result[SessionDiffOutput]{}, err
		}
		out := SessionDiffOutput{SessionID: s.ID, Base: diff.Base, Patch: diff.Patch, Truncated: diff.Truncated, Files: diff.Files, Notes: diff.Notes}
		if out.Files == nil {
			out.Files = []workspace.FileChange{}
		}
		text := diff.Patch
		if len(out.Files) == 0 {
			text = "no changes since the session was created"
		}
		for _, n := range diff.Notes {
			text += "\n[" + n + "]"
		}
		return result[SessionDiffOutput]{Out: out, Text: text}, nil
	})
	return Tool{Toolset: "sessions", Tool: t, Handler: h}
}

// listExtras adds what a listing shows beyond the session's row: its last
// activity and its disk use. Neither starts anything; a figure that cannot
// be had is left out.
func (d *deps) listExtras(ctx context.Context, user string, v *SessionView) {
	if d.events != nil {
		if at := d.events.LastAt(ctx, v.SessionID); !at.IsZero() {
			v.LastActivity = at.Format(time.RFC3339)
		}
	}
	if v.State == string(sessions.StateDeleted) {
		return
	}
	if s, err := d.sessions.Get(ctx, user, v.SessionID); err == nil {
		if n, err := d.sessions.DiskUse(s); err == nil {
			v.DiskBytes = n
		}
	}
}
