package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestStdioShellStatePersistsAndEditsReachTheDisk(t *testing.T) {
	needJail(t)
	ws := jailDir(t)
	user := serveStdio(t, "--workspace", ws, "--data-dir", jailDir(t))

	user.exec("mkdir -p src && cd src && export GREETING=hello")
	got := user.exec("echo $GREETING; pwd")
	if got["stdout"] != "hello\n/workspace/src\n" || got["cwd"] != "/workspace/src" {
		t.Fatalf("state lost between calls: %v", got)
	}
	user.exec("echo made-in-jail > note.txt")
	b, err := os.ReadFile(filepath.Join(ws, "src", "note.txt"))
	if err != nil || string(b) != "made-in-jail\n" {
		t.Fatalf("--workspace edit not on disk: %q %v", b, err)
	}
	// A failing command is a result, not a tool error.
	got = user.exec("echo oops >&2; exit 3")
	if got["exit_code"] != 3.0 || got["stderr"] != "oops\n" || got["shell_restarted"] != true {
		t.Fatalf("exit 3: %v", got)
	}
	if got := user.exec("echo $GREETING"); got["stdout"] != "hello\n" || got["cwd"] != "/workspace/src" {
		t.Fatalf("state lost after the shell restarted: %v", got)
	}
	got = user.exec("sleep 5", "timeout_ms", 300)
	if got["timed_out"] != true {
		t.Fatalf("timeout: %v", got)
	}
}

func TestStdioFileToolsRoundTripAndRefuseEscapes(t *testing.T) {
	needJail(t)
	ws := jailDir(t)
	user := serveStdio(t, "--workspace", ws, "--data-dir", jailDir(t))

	w := user.ok("write_file", map[string]any{"path": "/workspace/docs/a.txt", "content": "one\ntwo\nthree\n"})
	if w["path"] != "/workspace/docs/a.txt" || w["bytes"] != 14.0 {
		t.Fatalf("write_file: %v", w)
	}
	user.ok("write_file", map[string]any{"path": "docs/a.txt", "content": "four\n", "append": true})
	r := user.ok("read_file", map[string]any{"path": "docs/a.txt", "offset": 2, "limit": 2})
	if r["content"] != "two\nthree\n" || r["total_lines"] != 4.0 || r["truncated"] != true {
		t.Fatalf("read_file: %v", r)
	}
	user.fails("read_file", map[string]any{"path": "docs/a.txt", "offset": 0}, "offset is 1-based")
	e := user.ok("edit_file", map[string]any{"path": "docs/a.txt", "old_text": "two", "new_text": "TWO"})
	if e["replacements"] != 1.0 {
		t.Fatalf("edit_file: %v", e)
	}
	// The jail sees what the file tools wrote, and may change it.
	if got := user.exec("cat docs/a.txt && echo five >> docs/a.txt"); got["stdout"] != "one\nTWO\nthree\nfour\n" {
		t.Fatalf("jail view: %v", got)
	}
	user.fails("edit_file", map[string]any{"path": "docs/a.txt", "old_text": "nope", "new_text": "x"}, "not found")
	user.ok("write_file", map[string]any{"path": "dup.txt", "content": "x x"})
	user.fails("edit_file", map[string]any{"path": "dup.txt", "old_text": "x", "new_text": "y"}, "occurs 2 times")

	user.exec("ln -s /etc/passwd link && printf 'a\\000b' > bin.dat")
	for _, p := range []string{"../x", "/etc/passwd", "link", "/workspace/../etc/passwd"} {
		user.fails("read_file", map[string]any{"path": p}, "outside the workspace")
	}
	user.fails("write_file", map[string]any{"path": "../escape.txt", "content": "x"}, "outside the workspace")
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "escape.txt")); err == nil {
		t.Fatal("write_file escaped the workspace")
	}
	user.fails("read_file", map[string]any{"path": "bin.dat"}, "binary")
	user.fails("read_file", map[string]any{"path": "missing.txt"}, "does not exist")
}

func TestStdioBadArgumentsAreToolErrors(t *testing.T) {
	needJail(t)
	user := serveStdio(t, "--data-dir", jailDir(t))
	user.fails("shell_exec", map[string]any{"cmd": "ls"}, "command")
	user.fails("shell_exec", map[string]any{"command": 42}, "command")
	user.fails("shell_exec", map[string]any{"command": "  "}, "empty")
	user.fails("shell_exec", map[string]any{"command": "ls", "session_id": "s-doesnotexist"}, "session not found")
	user.fails("shell_wait", map[string]any{"job_id": "j-nope"}, "not found")
	// The server survived all of that.
	if got := user.exec("echo alive"); got["stdout"] != "alive\n" {
		t.Fatalf("after bad calls: %v", got)
	}
}

func TestStdioProgressArrivesBeforeTheResult(t *testing.T) {
	needJail(t)
	user := serveStdio(t, "--data-dir", jailDir(t))
	for i := range 5 {
		token := "tok-" + string(rune('a'+i))
		res, progress := user.callWithProgress("for i in 1 2 3; do echo line $i; sleep 0.05; done; printf end", token)
		if progress != res["stdout"] {
			t.Fatalf("run %d: progress before the result was %q, stdout %q", i, progress, res["stdout"])
		}
	}
}

func TestStdioYieldWaitAndKill(t *testing.T) {
	needJail(t)
	user := serveStdio(t, "--data-dir", jailDir(t))
	user.exec("true") // start the jail: the yield below measures the command, not a cold start

	got := user.exec("echo start; sleep 2; echo done", "yield_ms", 500)
	if got["running"] != true || got["job_id"] == nil || got["stdout"] != "start\n" {
		t.Fatalf("yield: %v", got)
	}
	job := got["job_id"].(string)
	user.fails("shell_exec", map[string]any{"command": "echo hi"}, "busy")
	done := user.ok("shell_wait", map[string]any{"job_id": job})
	if done["running"] != false || done["stdout"] != "done\n" || done["exit_code"] != 0.0 {
		t.Fatalf("wait: %v", done)
	}

	got = user.exec("export KEEP=1; sleep 60", "yield_ms", 50)
	start := time.Now()
	killed := user.ok("shell_kill", map[string]any{})
	if killed["interrupted"] != true || time.Since(start) > 5*time.Second {
		t.Fatalf("kill: %v after %s", killed, time.Since(start))
	}
	if got := user.exec("echo $KEEP"); got["stdout"] != "1\n" {
		t.Fatalf("state after kill: %v", got)
	}
	user.fails("shell_kill", map[string]any{}, "nothing is running")
}

func TestStdioCancellationInterruptsTheCommand(t *testing.T) {
	needJail(t)
	user := serveStdio(t, "--data-dir", jailDir(t))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := user.cs.CallTool(ctx, &sdk.CallToolParams{Name: "shell_exec", Arguments: map[string]any{"command": "sleep 60"}})
	if err == nil {
		t.Fatal("a cancelled call returned a result")
	}
	// The command was interrupted: the session is free again within moments.
	for {
		res := user.call("shell_exec", map[string]any{"command": "echo free"})
		if !res.IsError {
			break
		}
		if !strings.Contains(textOf(res), "busy") || time.Since(start) > 10*time.Second {
			t.Fatalf("after cancel: %s", textOf(res))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStdioSessionSurvivesARestart(t *testing.T) {
	needJail(t)
	data, ws := jailDir(t), jailDir(t)
	first := serveStdio(t, "--workspace", ws, "--data-dir", data)
	got := first.exec("mkdir -p deep/er && cd deep/er && export COLOR=green")
	id := got["session_id"].(string)
	first.cs.Close()

	second := serveStdio(t, "--workspace", ws, "--data-dir", data)
	got = second.exec("echo $COLOR; pwd", "session_id", id)
	if got["stdout"] != "green\n/workspace/deep/er\n" {
		t.Fatalf("after restart: %v", got)
	}
	// The default session is the same one.
	if got := second.exec("true"); got["session_id"] != id {
		t.Fatalf("default session changed across restarts: %v vs %s", got["session_id"], id)
	}
}

func TestToolsListHasAnnotationsAndSchemas(t *testing.T) {
	needJail(t)
	user := serveStdio(t, "--data-dir", jailDir(t), "--toolsets", "files")
	res, err := user.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		a := tool.Annotations
		if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil || tool.OutputSchema == nil {
			t.Errorf("%s: annotations or output schema missing: %+v", tool.Name, a)
		}
	}
	if strings.Join(names, ",") != "edit_file,read_file,write_file" {
		t.Fatalf("--toolsets files served %v", names)
	}
}

// A FIFO in the workspace must not hang the file tools: they refuse what is
// not a regular file before reading a byte.
func TestFileToolsRefuseSpecialFiles(t *testing.T) {
	needJail(t)
	user := serveStdio(t, "--data-dir", jailDir(t))
	user.exec("mkfifo pipe")
	user.fails("read_file", map[string]any{"path": "pipe"}, "not a regular file")
	user.fails("edit_file", map[string]any{"path": "pipe", "old_text": "a", "new_text": "b"}, "not a regular file")
	user.fails("write_file", map[string]any{"path": "pipe", "content": "x", "append": true}, "not a regular file")
	user.ok("write_file", map[string]any{"path": "fresh.txt", "content": "x", "append": true}) // a missing file is fine
	if got := user.ok("read_file", map[string]any{"path": "fresh.txt"}); got["content"] != "x" {
		t.Fatalf("append to a new file: %v", got)
	}
}
