package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestSessionsSurviveSIGKILLOfTheServer(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	srv := serveHTTP(t, "--data-dir", data, "--auth", "none")
	c := connectHTTP(t, srv, "")
	one := c.ok("session_create", map[string]any{"name": "one"})["session_id"].(string)
	two := c.ok("session_create", map[string]any{"name": "two"})["session_id"].(string)
	c.exec("mkdir -p sub && cd sub && export A=1", "session_id", one)
	c.exec("cd /tmp && export B='two words'", "session_id", two)

	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	srv.cmd.Wait()

	srv2 := serveHTTP(t, "--data-dir", data, "--auth", "none")
	c2 := connectHTTP(t, srv2, "")
	if got := c2.exec(`pwd; echo "$A"`, "session_id", one); got["stdout"] != "/workspace/sub\n1\n" {
		t.Fatalf("session one after kill -9: %v", got)
	}
	if got := c2.exec(`pwd; echo "$B"`, "session_id", two); got["stdout"] != "/tmp\ntwo words\n" {
		t.Fatalf("session two after kill -9: %v", got)
	}
	// Metering attributes calls without session_id to the default session,
	// which may therefore exist too: count the named ones.
	named := 0
	for _, s := range c2.ok("session_list", nil)["sessions"].([]any) {
		s := s.(map[string]any)
		if (s["name"] == "one" || s["name"] == "two") && s["state"] == "active" {
			named++
		}
	}
	if named != 2 {
		t.Fatalf("after kill -9 the list has %d of the 2 sessions", named)
	}
}

func TestHTTPUsersCannotSeeOrTouchEachOthersSessions(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	aliceTok, bobTok := createToken(t, data, "alice"), createToken(t, data, "bob")
	srv := serveHTTP(t, "--data-dir", data)
	alice, bob := connectHTTP(t, srv, aliceTok), connectHTTP(t, srv, bobTok)

	id := alice.ok("session_create", map[string]any{"name": "secret"})["session_id"].(string)
	alice.exec("echo secret > mine.txt", "session_id", id)
	bob.ok("session_create", map[string]any{"name": "bob's"})
	for _, s := range bob.ok("session_list", map[string]any{"include_deleted": true})["sessions"].([]any) {
		if s.(map[string]any)["session_id"] == id {
			t.Fatal("bob lists alice's session")
		}
	}
	// Every tool answers bob exactly as it would for an id that never existed.
	unknown := "s-00000000deadbeef"
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"shell_exec", map[string]any{"command": "cat mine.txt"}},
		{"shell_kill", map[string]any{}},
		{"read_file", map[string]any{"path": "mine.txt"}},
		{"write_file", map[string]any{"path": "mine.txt", "content": "bob was here"}},
		{"edit_file", map[string]any{"path": "mine.txt", "old_text": "secret", "new_text": "x"}},
		{"session_diff", map[string]any{}},
		{"session_control", map[string]any{"action": "pause"}},
		{"session_control", map[string]any{"action": "resume"}},
		{"session_control", map[string]any{"action": "archive"}},
		{"session_control", map[string]any{"action": "delete"}},
	}
	for _, call := range calls {
		errText := func(sid string) string {
			args := map[string]any{"session_id": sid}
			for k, v := range call.args {
				args[k] = v
			}
			res := bob.call(call.tool, args)
			if !res.IsError {
				t.Fatalf("bob %s on %s succeeded: %s", call.tool, sid, textOf(res))
			}
			return strings.ReplaceAll(textOf(res), sid, "ID")
		}
		if got, want := errText(id), errText(unknown); got != want || !strings.Contains(got, "session not found") {
			t.Errorf("%s %v: alice's id gives %q, an unknown id %q", call.tool, call.args, got, want)
		}
	}
	if got := alice.exec("cat mine.txt", "session_id", id); got["stdout"] != "secret\n" {
		t.Fatalf("alice's file after bob's attempts: %v", got)
	}

	// Lifecycle over MCP: an archived session is read-only, transitions are checked.
	alice.fails("session_control", map[string]any{"session_id": id, "action": "resume"},
		"cannot resume session "+id+": it is active, and only a paused session can be resumed")
	if st := alice.ok("session_control", map[string]any{"session_id": id, "action": "archive"})["state"]; st != "archived" {
		t.Fatalf("archive: state %v", st)
	}
	alice.fails("shell_exec", map[string]any{"session_id": id, "command": "ls"}, "cannot run commands in session "+id+": it is archived and read-only")
	alice.fails("write_file", map[string]any{"session_id": id, "path": "x", "content": "y"}, "cannot write files in session "+id+": it is archived and read-only")
	alice.fails("edit_file", map[string]any{"session_id": id, "path": "mine.txt", "old_text": "secret", "new_text": "x"}, "archived and read-only")
	if got := alice.ok("read_file", map[string]any{"session_id": id, "path": "mine.txt"}); got["content"] != "secret\n" {
		t.Fatalf("read an archived session: %v", got)
	}
	diff := alice.ok("session_diff", map[string]any{"session_id": id})
	if files := diff["files"].([]any); len(files) != 1 || !strings.Contains(diff["patch"].(string), "+secret") {
		t.Fatalf("diff of the archived session: %v", diff)
	}
	alice.fails("session_control", map[string]any{"session_id": id, "action": "pause"}, "it is archived, and only an active session can be paused")
	if st := alice.ok("session_control", map[string]any{"session_id": id, "action": "delete"})["state"]; st != "deleted" {
		t.Fatalf("delete: state %v", st)
	}
	alice.fails("read_file", map[string]any{"session_id": id, "path": "mine.txt"}, "it was deleted")
}

func TestQuotaIsEnforcedOverMCP(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	c := serveStdio(t, "--data-dir", data, "--quota", "64K")
	c.ok("write_file", map[string]any{"path": "a.txt", "content": strings.Repeat("x", 40<<10)})
	// A write that would cross the quota is refused before it is written.
	c.fails("write_file", map[string]any{"path": "b.txt", "content": strings.Repeat("x", 40<<10)}, "over its quota of 64.0 KiB")
	c.fails("read_file", map[string]any{"path": "b.txt"}, "does not exist")
	// A command that writes past it is stopped, and its result says so.
	got := c.exec("head -c 10M /dev/zero > big; ls -s big")
	if e, _ := got["stderr"].(string); !strings.Contains(e, "over its quota of 64.0 KiB") || !strings.Contains(e, "rm") {
		t.Fatalf("a command crossing the quota: %v", got)
	}
	c.fails("write_file", map[string]any{"path": "more.txt", "content": "x"}, "over its quota of 64.0 KiB")
	// Over it, commands run but cannot grow usage; rm frees space.
	if got := c.exec("echo more > more.txt"); got["exit_code"] == 0.0 {
		t.Fatalf("a write over the quota succeeded: %v", got)
	}
	c.exec("rm big")
	if got := c.exec("echo ok > more.txt && cat more.txt"); got["stdout"] != "ok\n" {
		t.Fatalf("after freeing space: %v", got)
	}
}

func TestSessionCreateClonesWithProgressAndDiffs(t *testing.T) {
	needJail(t)
	repo := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "first"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	c := serveStdio(t, "--data-dir", jailDir(t))
	p := &sdk.CallToolParams{Name: "session_create", Arguments: map[string]any{"source": "file://" + repo, "ref": "main"}}
	p.SetProgressToken("clone-1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.cs.CallTool(ctx, p)
	if err != nil || res.IsError {
		t.Fatalf("session_create: %v %s", err, textOfMaybe(res))
	}
	s := structured(t, res)
	if s["mode"] != "clone" || len(s["commit"].(string)) != 40 || s["state"] != "active" {
		t.Fatalf("created %v", s)
	}
	if progress := progressMessages(c.wire.snapshot(), "clone-1"); !strings.Contains(progress, "cloning file://"+repo) {
		t.Fatalf("clone progress %q", progress)
	}
	id := s["session_id"].(string)
	c.exec("echo new > added.txt", "session_id", id)
	d := c.ok("session_diff", map[string]any{"session_id": id})
	files := d["files"].([]any)
	if len(files) != 1 || files[0].(map[string]any)["status"] != "added" || files[0].(map[string]any)["path"] != "added.txt" {
		t.Fatalf("diff %v", d)
	}
}

// Listing, and calls that need no workspace, create no session: the
// metering of their results must not invent a default session to bill.
func TestListingCreatesNoSession(t *testing.T) {
	c := serveStdio(t, "--data-dir", t.TempDir())
	for range 3 {
		if got := c.ok("session_list", nil)["sessions"].([]any); len(got) != 0 {
			t.Fatalf("session_list on a fresh server: %v", got)
		}
	}
	c.ok("task_list", map[string]any{})
	if got := c.ok("session_list", nil)["sessions"].([]any); len(got) != 0 {
		t.Fatalf("after task_list: %v", got)
	}
}

// A session's $HOME is its own, outside the workspace: a tool that writes
// caches or dotfiles leaves the user's directory alone.
func TestSessionHomeStaysOutOfTheWorkspace(t *testing.T) {
	ws := jailDir(t)
	c := serveStdio(t, "--workspace", ws, "--data-dir", jailDir(t))
	out := c.exec("mkdir -p ~/.cache/x && git config --global user.name agent && echo $HOME")
	if out["stdout"] != "/home/warren\n" {
		t.Fatalf("HOME: %v", out)
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 0 {
		t.Fatalf("dotfiles landed in the bound workspace: %v", entries)
	}
}
