package mcp

import (
	"testing"

	"github.com/rs/zerolog"
)

// A server built without a session manager (only tools of its own, as
// the tracing benchmark builds it) closes without touching one: it
// panicked once the manager came to own the commands.
func TestServerWithoutSessionsCloses(t *testing.T) {
	srv, err := New(Options{Log: zerolog.Nop(), Toolsets: []string{"shell"}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
}
