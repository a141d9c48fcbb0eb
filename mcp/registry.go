// Package mcp serves warren's workspace sessions as MCP tools over stdio and
// streamable HTTP, on github.com/mark3labs/mcp-go. Each tool has one
// constructor that returns its definition and handler together; toolsets
// are plain metadata filtered at start-up.
package mcp

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/events"
	"github.com/warrenhq/warren/sessions/gitpush"
	"github.com/warrenhq/warren/tasks"
)

// Tool is one MCP tool: its definition, its handler and the toolset it
// belongs to.
type Tool struct {
	Toolset string
	Tool    mcp.Tool
	Handler server.ToolHandlerFunc
}

// Toolsets known to this build, in the order the docs list them.
var Toolsets = []string{"shell", "files", "sessions", "tasks", "usage", "agent"}

// deps are what the tool handlers need. They arrive through the tool
// constructors, never through the context; only the calling user (a
// property of the request) travels in the context.
type deps struct {
	sessions *sessions.Manager
	tasks    *tasks.Board    // nil: the tasks toolset is not served
	meter    *metering.Meter // nil: the usage toolset is not served, nothing is metered
	events   *events.Log     // nil: session_watch is not served, no activity is logged
	usage    *usageQueue     // tool-output records on their way to meter
	// shellYield is how long shell calls wait before returning a running
	// command as a job; 0 means DefaultYield.
	shellYield time.Duration
	notes      *notifier
	// shared holds the MCP sessions' owners when replicas share them
	// (http_sessions_client.go).
	shared sharedOwners
	// watchers counts each user's session_watch calls in flight.
	watchers watchSlots
	// clientLevels are the log levels clients set (logging/setLevel).
	clientLevels clientLevels
	log          zerolog.Logger
	agent        AgentRunner       // nil: the agent toolset is not served
	srv          *server.MCPServer // for elicitation
	git          *gitpush.Service  // nil: identity_list and session_push are not served
}

func allTools(d *deps) []Tool {
	return plainSchemas([]Tool{
		shellExec(d), shellWait(d), shellKill(d),
		readFile(d), writeFile(d), editFile(d),
		sessionCreate(d), sessionList(d), sessionControl(d), sessionDiff(d), sessionWatch(d), sessionNetworkLog(d),
		identityList(d), sessionPush(d),
		taskList(d), taskClaim(d), taskUpdate(d), taskAdd(d),
		usageReport(d), usageRecord(d),
		agentRun(d),
	})
}

// servedTools drops the toolsets whose service is not configured, so that
// the tool list says nothing about them.
func servedTools(all []Tool, d *deps) []Tool {
	var out []Tool
	for _, t := range all {
		if (t.Toolset == "tasks" && d.tasks == nil) || (t.Toolset == "usage" && d.meter == nil) || (t.Toolset == "agent" && d.agent == nil) ||
			(t.Tool.Name == "session_watch" && d.events == nil) ||
			((t.Tool.Name == "identity_list" || t.Tool.Name == "session_push") && d.git == nil) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// selectTools keeps the tools of the named toolsets; none named means all.
func selectTools(all []Tool, names []string) ([]Tool, error) {
	if len(names) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if n == "all" {
			return all, nil
		}
		if !slices.Contains(Toolsets, n) {
			return nil, fmt.Errorf("unknown toolset %q: choose from %s", n, strings.Join(Toolsets, ", "))
		}
		want[n] = true
	}
	var out []Tool
	for _, t := range all {
		if want[t.Toolset] {
			out = append(out, t)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Tool.Name < out[j].Tool.Name })
	return out, nil
}

// annotations sets all four hints explicitly: mcp-go defaults
// destructiveHint and openWorldHint to true, which would misdescribe
// read-only tools.
func annotations(title string, readOnly, destructive, idempotent, openWorld bool) mcp.ToolOption {
	return func(t *mcp.Tool) {
		t.Annotations = mcp.ToolAnnotation{
			Title:           title,
			ReadOnlyHint:    mcp.ToBoolPtr(readOnly),
			DestructiveHint: mcp.ToBoolPtr(destructive),
			IdempotentHint:  mcp.ToBoolPtr(idempotent),
			OpenWorldHint:   mcp.ToBoolPtr(openWorld),
		}
	}
}
