package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// written is set at run time, in the process's writable data: what
// releaseImagePages must never drop.
var written = map[string]int{}

// TestReleaseImagePagesKeepsWhatWasWritten: after the release, this test
// process's RSS is lower, its data as it was, and its code still runs.
func TestReleaseImagePagesKeepsWhatWasWritten(t *testing.T) {
	written["answer"] = 42
	before := statusKB(os.Getpid(), "VmRSS")
	releaseImagePages()
	after := statusKB(os.Getpid(), "VmRSS")
	if after >= before {
		t.Errorf("VmRSS %d kB before, %d kB after: nothing released", before, after)
	}
	if written["answer"] != 42 {
		t.Fatalf("data written before the release changed: %v", written)
	}
	t.Logf("test process VmRSS %d -> %d kB", before, after)
}

// TestServerWorksAfterIdleTrim: a server left idle long enough to trim
// itself (its free heap and its image pages released) answers every kind
// of call afterwards as before, and holds less than it did.
func TestServerWorksAfterIdleTrim(t *testing.T) {
	needJail(t)
	ws := t.TempDir()
	if err := os.WriteFile(ws+"/note.txt", []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(warrenBin, "serve", "stdio", "--data-dir", jailDir(t), "--workspace", ws)
	cmd.Stderr = newTestLog(t, "server: ")
	c := connect(t, &sdk.CommandTransport{Command: cmd, TerminateDuration: 3 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := func(name string, args map[string]any) string {
		res, err := c.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %s", name, err, textOf(res))
		}
		return textOf(res)
	}
	call("shell_exec", map[string]any{"command": "cd /workspace && export MARK=one"})
	busy := statusKB(cmd.Process.Pid, "VmRSS")
	time.Sleep(3*idleCheckEvery + time.Second)
	idle := statusKB(cmd.Process.Pid, "VmRSS")
	if idle >= busy {
		t.Errorf("VmRSS %d kB after a call, %d kB idle: the idle server released nothing", busy, idle)
	}
	if out := call("shell_exec", map[string]any{"command": "echo $MARK; cat note.txt"}); !strings.Contains(out, "one") || !strings.Contains(out, "kept") {
		t.Errorf("shell_exec after the trim: %s", out)
	}
	if out := call("read_file", map[string]any{"path": "note.txt"}); !strings.Contains(out, "kept") {
		t.Errorf("read_file after the trim: %s", out)
	}
	if _, err := c.cs.ListTools(ctx, nil); err != nil {
		t.Errorf("tools/list after the trim: %v", err)
	}
	t.Logf("server VmRSS %d kB after a call, %d kB idle", busy, idle)
}
