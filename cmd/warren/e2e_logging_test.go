package main

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
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

// A session nearing its disk quota is told once, in the command's result
// and as a notification, before commands are stopped at the quota.
func TestClientsAreToldTheirQuotaIsNearlyFull(t *testing.T) {
	needJail(t)
	var mu sync.Mutex
	var logs []string
	c := sdk.NewClient(&sdk.Implementation{Name: "warren-e2e", Version: "1"}, &sdk.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *sdk.LoggingMessageRequest) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, fmt.Sprint(req.Params.Data))
		},
	})
	cmd := exec.Command(warrenBin, "serve", "stdio", "--data-dir", jailDir(t), "--quota", "1M")
	cmd.Stderr = newTestLog(t, "server: ")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A 2025-06-18 client gets warnings without asking; a 2026-07-28 one
	// asks per request in _meta (see TestClientsAreToldWhatTheyShouldKnow).
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second},
		&sdk.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	run := func(command string) string {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "shell_exec", Arguments: map[string]any{"command": command}})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(res.StructuredContent)
	}
	run("true")
	if out := run("head -c 960000 /dev/zero > big; sync"); !strings.Contains(out, "of its 1.0 MiB disk quota") {
		t.Fatalf("the result does not warn of the nearly full quota: %s", out)
	}
	if out := run("true"); strings.Contains(out, "disk quota") {
		t.Fatalf("the warning came twice: %s", out)
	}
	waitFor(t, "the quota notification", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(strings.Join(logs, "\n"), "disk_quota")
	})
}

func waitForT(t *testing.T, what string, d time.Duration, cond func() bool) {
	waitFor(t, what, d, cond)
}
