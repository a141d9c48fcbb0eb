package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestClientsAreToldWhatTheyShouldKnow: warren declares logging, honours
// logging/setLevel, and sends notifications/message when something happens
// that a client should know although its call succeeded (a shell that died
// and was restarted).
func TestClientsAreToldWhatTheyShouldKnow(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	srv := serveHTTP(t, "--data-dir", data, "--auth", "none")

	// A client sets its level with logging/setLevel (before the 2026-07-28
	// revision; since, it asks per request in _meta, which mcp-go honours).
	for _, tc := range []struct {
		protocol string
		meta     map[string]any
	}{
		{"2025-06-18", nil},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			var mu sync.Mutex
			var logs []string
			c := sdk.NewClient(&sdk.Implementation{Name: "warren-e2e", Version: "1"}, &sdk.ClientOptions{
				LoggingMessageHandler: func(_ context.Context, req *sdk.LoggingMessageRequest) {
					mu.Lock()
					defer mu.Unlock()
					logs = append(logs, fmt.Sprintf("%s %s %v", req.Params.Level, req.Params.Logger, req.Params.Data))
				},
			})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: srv.url, HTTPClient: http.DefaultClient, MaxRetries: -1},
				&sdk.ClientSessionOptions{ProtocolVersion: tc.protocol})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if caps := cs.InitializeResult().Capabilities; caps.Logging == nil {
				t.Fatalf("no logging capability: %+v", caps)
			}
			if tc.meta == nil {
				if err := cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "info"}); err != nil {
					t.Fatalf("logging/setLevel: %v", err)
				}
			}
			call := func(command string) *sdk.CallToolResult {
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "shell_exec", Arguments: map[string]any{"command": command}, Meta: tc.meta})
				if err != nil {
					t.Fatalf("%s: %v", command, err)
				}
				return res
			}
			call("true")
			died := textOf(call("kill -9 $$")) + textOf(call("echo alive"))
			if !strings.Contains(died, "restarted") {
				t.Fatalf("the shell was not restarted: %q", died)
			}
			mu.Lock()
			defer mu.Unlock()
			if !strings.Contains(strings.Join(logs, "\n"), "restarted") {
				t.Fatalf("no notification that the shell restarted; messages: %q", logs)
			}
		})
	}
}
