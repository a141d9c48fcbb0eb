package mcp

import (
	"context"
	"encoding/json"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// A replica serving an MCP session it did not open has no record of what
// the client said at initialize: mcp-go serves each such request with a
// fresh session object. What the tools use of it (the client's name in
// usage records and the activity log, whether it can answer elicitation
// for agent_run's approvals) is kept with the shared session and put back
// on that object before the request is handled.

// sharedClient is what is kept of a client: its description (already
// bounded by boundClientInfo) and capabilities.
type sharedClient struct {
	Info         mcp.Implementation     `json:"info"`
	Capabilities mcp.ClientCapabilities `json:"capabilities"`
}

// maxSharedClient keeps the record under what the store accepts
// (sessions.MaxMCPClient).
const maxSharedClient = 4 << 10

// sharedOwners is set by HTTPHandler when MCP sessions are shared.
type sharedOwners struct{ p atomic.Pointer[sessionOwners] }

// recordClient stores what the client of a new MCP session said of itself.
func (o *sharedOwners) recordClient(ctx context.Context, _ any, req *mcp.InitializeRequest, _ *mcp.InitializeResult) {
	owners := o.p.Load()
	s := server.ClientSessionFromContext(ctx)
	if owners == nil || owners.shared == nil || s == nil || req == nil || s.SessionID() == "" {
		return
	}
	c := sharedClient{Info: req.Params.ClientInfo, Capabilities: req.Params.Capabilities}
	b, err := json.Marshal(c)
	if err == nil && len(b) > maxSharedClient {
		// Only what the tools use: a client that describes itself at
		// length is not stored at length.
		c = sharedClient{Info: mcp.Implementation{Name: c.Info.Name, Version: c.Info.Version},
			Capabilities: mcp.ClientCapabilities{Elicitation: c.Capabilities.Elicitation, Sampling: c.Capabilities.Sampling, Roots: c.Capabilities.Roots}}
		b, err = json.Marshal(c)
	}
	if err != nil || len(b) > maxSharedClient {
		return
	}
	owners.mu.Lock()
	if e, ok := owners.owner[s.SessionID()]; ok {
		e.client = string(b)
		owners.owner[s.SessionID()] = e
	}
	owners.mu.Unlock()
	_ = owners.shared.SetClient(context.WithoutCancel(ctx), s.SessionID(), string(b))
}

// restoreClient gives a request of an MCP session opened on another
// replica its client's description.
func (o *sharedOwners) restoreClient(ctx context.Context, _ any, _ mcp.MCPMethod, _ any) {
	owners := o.p.Load()
	if owners == nil || owners.shared == nil {
		return
	}
	s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
	if !ok || s.SessionID() == "" || s.GetClientInfo().Name != "" {
		return // sessionless, or opened here (its object knows)
	}
	owners.mu.Lock()
	e := owners.owner[s.SessionID()]
	owners.mu.Unlock()
	var c sharedClient
	if e.client == "" || json.Unmarshal([]byte(e.client), &c) != nil {
		return
	}
	s.SetClientInfo(c.Info)
	s.SetClientCapabilities(c.Capabilities)
}
