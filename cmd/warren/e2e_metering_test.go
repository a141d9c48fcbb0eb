package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A graceful shutdown (SIGTERM) under load writes the usage record of
// every call that was answered: records queued by calls that finish while
// the server shuts down are not dropped.
func TestShutdownKeepsEveryToolOutputRecord(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	const users = 4
	tokens := make([]string, users)
	for i := range tokens {
		tokens[i] = createToken(t, data, fmt.Sprintf("u%d", i))
	}
	srv := serveHTTP(t, "--data-dir", data)
	var answered atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range users {
		c := connectHTTP(t, srv, tokens[i])
		c.ok("shell_exec", map[string]any{"command": "true"}) // start the jail
		answered.Add(1)
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res, err := c.cs.CallTool(ctx, &sdk.CallToolParams{Name: "shell_exec", Arguments: map[string]any{"command": "echo hi"}})
				cancel()
				if err != nil {
					return // the server went away
				}
				if res != nil {
					answered.Add(1)
				}
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	if err := srv.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	_ = srv.cmd.Wait()
	close(stop)
	wg.Wait()

	db, err := openDB(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var recorded int64
	if err := db.QueryRow(`SELECT count(*) FROM usage_records WHERE kind = 'tool_output' AND tool = 'shell_exec'`).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if recorded < answered.Load() {
		t.Fatalf("%d shell_exec calls were answered but only %d usage records were written: %d lost at shutdown",
			answered.Load(), recorded, answered.Load()-recorded)
	}
	t.Logf("%d calls answered, %d records written", answered.Load(), recorded)
}
