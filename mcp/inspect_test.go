package mcp

// What the tests look at inside the server, and nothing else does.

// Registry returns every tool of this build, with handlers bound to nothing:
// for docs and schema snapshots. Calling a handler of it panics.
func Registry() []Tool { return allTools(&deps{}) }

// kept returns the bytes kept for sessionID ("" for all sessions).
func (s *eventStore) kept(sessionID string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sessionID == "" {
		return s.bytes
	}
	if log := s.sessions[sessionID]; log != nil {
		return log.bytes
	}
	return 0
}

// count returns the number of live MCP sessions.
func (o *sessionOwners) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.owner)
}
