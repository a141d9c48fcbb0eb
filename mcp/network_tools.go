package mcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/warrenhq/warren/sessions"
)

// NetworkPolicy is a session's network policy as tools show and take it.
type NetworkPolicy struct {
	Mode  string   `json:"mode" jsonschema:"none (loopback only), allowlist (HTTP/HTTPS through warren's proxy) or host (the server's whole network)"`
	Allow []string `json:"allow,omitempty" jsonschema:"allowlist mode: presets (npm, pypi, go, github, debian) and host patterns such as registry.npmjs.org, *.example.com or host:8080 (no port: 80 and 443)"`
}

func (n *NetworkPolicy) policy() *sessions.Network {
	if n == nil {
		return nil
	}
	return &sessions.Network{Mode: sessions.NetworkMode(n.Mode), Allow: n.Allow}
}

func networkView(n sessions.Network) NetworkPolicy {
	v := NetworkPolicy{Mode: string(n.Mode), Allow: n.Allow}
	if v.Mode == "" {
		v.Mode = string(sessions.NetNone)
	}
	return v
}

func renderNetwork(n NetworkPolicy) string {
	if len(n.Allow) == 0 {
		return n.Mode
	}
	return n.Mode + " (" + strings.Join(n.Allow, ", ") + ")"
}

// NetworkLogInput is the input of session_network_log.
type NetworkLogInput struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"the session; omitted: your default session"`
	Limit     int    `json:"limit,omitempty" jsonschema:"how many of the newest decisions (default 50, at most 1000)"`
}

// NetworkDecision is one request or tunnel the proxy allowed or refused.
type NetworkDecision struct {
	Time      string `json:"time" jsonschema:"RFC 3339"`
	Method    string `json:"method" jsonschema:"CONNECT for an HTTPS tunnel, else the HTTP method"`
	Host      string `json:"host"`
	Port      int    `json:"port"`
	Allowed   bool   `json:"allowed"`
	Reason    string `json:"reason,omitempty" jsonschema:"why it was refused"`
	Status    int    `json:"status,omitempty" jsonschema:"HTTP status of a refusal or of a forwarded response"`
	BytesUp   int64  `json:"bytes_up" jsonschema:"bytes sent to the host"`
	BytesDown int64  `json:"bytes_down" jsonschema:"bytes received from the host"`
}

// NetworkLogOutput is the output of session_network_log.
type NetworkLogOutput struct {
	SessionID string            `json:"session_id"`
	Network   NetworkPolicy     `json:"network" jsonschema:"the session's current policy"`
	Decisions []NetworkDecision `json:"decisions" jsonschema:"oldest first"`
}

func (o NetworkLogOutput) inSession() string { return o.SessionID }

func sessionNetworkLog(d *deps) Tool {
	t := mcp.NewTool("session_network_log",
		mcp.WithDescription("Show the recent decisions of a session's egress proxy: each host a command in the jail "+
			"tried to reach, whether it was allowed, why not, and the bytes moved. Use it when a download, npm "+
			"install or git fetch fails in an allowlist session."),
		mcp.WithInputSchema[NetworkLogInput](),
		mcp.WithOutputSchema[NetworkLogOutput](),
		annotations("Network decisions of a session", true, false, true, false),
	)
	h := typedHandler(func(ctx context.Context, _ mcp.CallToolRequest, in NetworkLogInput) (result[NetworkLogOutput], error) {
		user, err := callerOf(ctx)
		if err != nil {
			return result[NetworkLogOutput]{}, err
		}
		limit := in.Limit
		if limit <= 0 {
			limit = 50
		}
		s, list, err := d.sessions.NetworkLog(ctx, user, in.SessionID, min(limit, 1000))
		if err != nil {
			return result[NetworkLogOutput]{}, err
		}
		out := NetworkLogOutput{SessionID: s.ID, Network: networkView(s.NetworkPolicy()), Decisions: []NetworkDecision{}}
		var b strings.Builder
		fmt.Fprintf(&b, "session %s, network %s\n", s.ID, renderNetwork(out.Network))
		for _, x := range list {
			v := NetworkDecision{Time: x.Time.Format(time.RFC3339), Method: x.Method, Host: x.Host, Port: int(x.Port),
				Allowed: x.Allowed, Reason: x.Reason, Status: x.Status, BytesUp: x.BytesUp, BytesDown: x.BytesDown}
			out.Decisions = append(out.Decisions, v)
			b.WriteString(sessions.DecisionLine(x) + "\n")
		}
		if len(list) == 0 {
			b.WriteString("no network activity recorded\n")
		}
		return result[NetworkLogOutput]{Out: out, Text: b.String()}, nil
	})
	return Tool{Toolset: "sessions", Tool: t, Handler: h}
}
