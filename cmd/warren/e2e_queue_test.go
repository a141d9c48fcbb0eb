package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Clients that call tools in parallel (the Inspector's load mode, agents
// that batch tool calls) get every call run, one at a time, in the order
// they were sent.
func TestParallelCallsOnOneSessionRunInArrivalOrder(t *testing.T) {
	needJail(t)
	user := serveStdio(t, "--data-dir", jailDir(t))
	user.exec("true") // start the jail

	const n = 10
	var wg sync.WaitGroup
	results := make([]*sdk.CallToolResult, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			results[i], errs[i] = user.cs.CallTool(ctx, &sdk.CallToolParams{Name: "shell_exec",
				Arguments: map[string]any{"command": fmt.Sprintf("sleep 0.1; echo %d >> order.txt", i)}})
		}()
		time.Sleep(30 * time.Millisecond) // sent in this order
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if results[i].IsError {
			t.Fatalf("call %d was refused: %s", i, textOf(results[i]))
		}
	}
	got := user.exec("tr '\\n' ' ' < order.txt")["stdout"]
	if got != "0 1 2 3 4 5 6 7 8 9 " {
		t.Fatalf("the calls ran in the order %q", got)
	}
}

// A call queued behind a command whose call yielded (left running as a
// job) is refused with that job's id: nobody is waiting for the job.
func TestCallQueuedBehindALeftRunningJobIsRefusedWithItsID(t *testing.T) {
	needJail(t)
	user := serveStdio(t, "--data-dir", jailDir(t))
	user.exec("true")

	first := make(chan map[string]any, 1)
	go func() { first <- user.exec("sleep 1.5; echo first", "yield_ms", 700) }()
	time.Sleep(200 * time.Millisecond)
	second := user.call("shell_exec", map[string]any{"command": "echo second"})
	got := <-first
	if got["running"] != true {
		t.Fatalf("the first command did not yield: %v", got)
	}
	job := got["job_id"].(string)
	if !second.IsError || !strings.Contains(textOf(second), job) || !strings.Contains(textOf(second), "shell_wait") {
		t.Fatalf("the queued call behind job %s: %s", job, textOf(second))
	}
	if done := user.ok("shell_wait", map[string]any{"job_id": job}); done["stdout"] != "first\n" {
		t.Fatalf("wait: %v", done)
	}
	if got := user.exec("echo free"); got["stdout"] != "free\n" {
		t.Fatalf("after the job: %v", got)
	}
}

// Right after a call is cancelled, the next call runs: the cancelled
// command is gone, or waited for, before the next one is judged.
func TestCallRightAfterACancellationRuns(t *testing.T) {
	needJail(t)
	user := serveStdio(t, "--data-dir", jailDir(t))
	user.exec("true")
	for i := range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := user.cs.CallTool(ctx, &sdk.CallToolParams{Name: "shell_exec",
				Arguments: map[string]any{"command": "sleep 60"}})
			errc <- err
		}()
		time.Sleep(300 * time.Millisecond)
		cancel()
		if err := <-errc; err == nil {
			t.Fatalf("try %d: the cancelled call returned a result", i)
		}
		res := user.call("shell_exec", map[string]any{"command": "ps -eo args | grep -c '^sleep 60$'"})
		if res.IsError {
			t.Fatalf("try %d: the call right after a cancellation was refused: %s", i, textOf(res))
		}
		if got := structured(t, res)["stdout"]; got != "0\n" {
			t.Fatalf("try %d: the cancelled command still runs: %v", i, got)
		}
	}
}

// By default a long command comes back as a job before clients give up,
// with its output so far and words that say to call shell_wait.
func TestLongCommandBecomesAJobAfterTheDefaultYield(t *testing.T) {
	needJail(t)
	user := serveStdio(t, "--data-dir", jailDir(t), "--shell-yield", "1s")
	user.exec("true")

	res := user.call("shell_exec", map[string]any{"command": "echo start; sleep 3; echo done"})
	got := structured(t, res)
	if res.IsError || got["running"] != true || got["job_id"] == nil || got["stdout"] != "start\n" ||
		!strings.Contains(textOf(res), "shell_wait") {
		t.Fatalf("a 3 s command with a 1 s yield: %v\n%s", got, textOf(res))
	}
	job := got["job_id"].(string)
	var out strings.Builder
	for {
		w := user.ok("shell_wait", map[string]any{"job_id": job})
		out.WriteString(w["stdout"].(string))
		if w["running"] == false {
			if w["exit_code"] != 0.0 || w["state_saved"] != true {
				t.Fatalf("end of the job: %v", w)
			}
			break
		}
	}
	if out.String() != "done\n" {
		t.Fatalf("shell_wait collected %q", out.String())
	}
}
