package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// After a session's jail has started, the server process makes no system
// call naming a path inside the workspace: the runner in the jail does all
// the workspace's work, so no link, rename or FIFO a command makes can
// trick host code. The server runs under strace (following its threads,
// not its children: the jail's own calls are the jail's business) through
// a workload of every tool that touches the workspace; the first call of a
// server thread that names the workspace (a path argument in it, or a
// descriptor strace resolves into it) fails the test. The workspace's root
// itself may be named (namesInside): reopened as an O_PATH descriptor that
// follows no link (the check, before each use, that the stored workspace
// still resolves where it may), stat'ed, its descriptor handed to a jail.
func TestServerMakesNoSystemCallOnWorkspacePathsAfterTheJailStarts(t *testing.T) {
	needJail(t)
	if _, err := exec.LookPath("strace"); err != nil {
		t.Fatal("strace is not installed: run 'apt-get install strace' (.ci/run installs it)")
	}
	// The task board's file in the workspace (the default with
	// --workspace, <workspace>/docs/TASKS.md) is read and written by a
	// runner of the board's own, in a jail of its own; one outside every
	// workspace (--tasks, the data directory) by the server.
	t.Run("board in the workspace", func(t *testing.T) { traceWorkload(t, false) })
	t.Run("board in the data directory", func(t *testing.T) { traceWorkload(t, true) })
}

// traceWorkload runs the workload under strace and fails on the first
// call of the server that names the workspace after a jail started.
func traceWorkload(t *testing.T, boardOutside bool) {
	ws := jailDir(t)
	ws, _ = filepath.EvalSymlinks(ws)
	if err := os.WriteFile(filepath.Join(ws, "seed.txt"), []byte("seed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(t.TempDir(), "trace")
	data := t.TempDir()
	args := []string{"-f", "-y", "-qq", "-s", "512", "-o", trace,
		"-e", "trace=%file,%desc,%process", warrenBin, "serve", "stdio", "--workspace", ws, "--data-dir", data}
	if boardOutside {
		args = append(args, "--tasks", filepath.Join(data, "TASKS.md"))
	}
	cmd := exec.Command("strace", args...)
	cmd.Stderr = newTestLog(t, "server: ")
	c := connect(t, &sdk.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second})

	// The workload: every tool that reads, writes, walks or measures the
	// workspace, with the jail running.
	c.exec("echo started > started.txt && mkdir -p sub && cd sub && export X=1")
	c.ok("write_file", map[string]any{"path": "sub/a.txt", "content": "hello\n"})
	c.ok("read_file", map[string]any{"path": "sub/a.txt"})
	c.ok("read_file", map[string]any{"path": "/workspace/seed.txt"})
	c.ok("edit_file", map[string]any{"path": "sub/a.txt", "old_text": "hello", "new_text": "bye"})
	c.ok("session_diff", map[string]any{})
	if r := c.exec("sleep 0.3; echo slow", "yield_ms", 10); r["job_id"] != nil {
		c.ok("shell_wait", map[string]any{"job_id": r["job_id"]})
	}
	c.exec("head -c 100000 /dev/zero > big.bin")
	c.ok("session_list", map[string]any{})
	c.ok("usage_report", map[string]any{"group_by": "session"})
	c.ok("task_add", map[string]any{"title": "Traced task"})
	c.ok("task_list", map[string]any{})
	if !boardOutside {
		// A hand edit of the board's file, merged by the next call.
		c.exec("sed -i 's/Traced task/Traced task, edited by hand/' /workspace/docs/TASKS.md")
	}
	c.ok("task_update", map[string]any{"task_id": "T-1", "note": "a note"})
	c.ok("task_list", map[string]any{})
	c.exec("pwd")
	c.cs.Close()

	if bad := workspaceCalls(t, trace, ws); len(bad) > 0 {
		t.Fatalf("%d system calls of the server name the workspace after its jail started; the first ones:\n%s",
			len(bad), strings.Join(bad[:min(len(bad), 15)], "\n"))
	}
	if !boardOutside {
		b, err := os.ReadFile(filepath.Join(ws, "docs", "TASKS.md"))
		if err != nil || !strings.Contains(string(b), "T-1 Traced task, edited by hand") || !strings.Contains(string(b), "a note") {
			t.Fatalf("the board's file: %q, %v", b, err)
		}
	}
}

var (
	traceLine = regexp.MustCompile(`^(\d+) +(.*)$`)
	cloneRet  = regexp.MustCompile(`^(clone3?|vfork|fork)\(.*\) = (\d+)`)
)

// workspaceCalls reads the strace log and returns the calls of the server's
// own threads, after the first jail started, that name a path inside ws.
func workspaceCalls(t *testing.T, trace, ws string) []string {
	t.Helper()
	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	server := map[int]bool{}
	first := true
	started := false
	var bad []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := traceLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		tid, _ := strconv.Atoi(m[1])
		call := m[2]
		if first { // strace's child: warren itself
			server[tid], first = true, false
		}
		if strings.Contains(call, "bwrap") && strings.HasPrefix(call, "execve(") && strings.Contains(call, `"--tmpfs"`) {
			// A child of the server became the first session's jail (its
			// /tmp is a tmpfs). The task board's jail (a runner and no
			// shell, no /tmp) may start before: nothing in it runs but
			// what the server asks of its runner.
			started = true
			continue
		}
		if !server[tid] {
			continue
		}
		if cm := cloneRet.FindStringSubmatch(call); cm != nil && strings.Contains(call, "CLONE_THREAD") {
			n, _ := strconv.Atoi(cm[2])
			server[n] = true
		}
		if !started || !namesInside(call, ws) {
			continue
		}
		bad = append(bad, call)
	}
	if !started {
		t.Fatal("the trace shows no session's jail starting: the test would prove nothing")
	}
	return bad
}

// namesInside reports whether call names something inside the workspace
// ws: a path beneath it (as an argument, or as a descriptor strace
// resolves), a name looked up relative to a descriptor of its root, or the
// root directory's entries read. Naming the root itself (reopening it as
// an O_PATH descriptor, its stat, handing its descriptor to a jail) is
// not; neither are bytes the server writes to a client that mention the
// path (session_list returns it).
func namesInside(call, ws string) bool {
	name := call
	if i := strings.IndexByte(call, '('); i > 0 {
		name = call[:i]
	}
	switch name {
	case "write", "writev", "sendmsg", "sendto", "pwrite64":
		fd := fdPath.FindStringSubmatch(call)
		return fd != nil && (fd[1] == ws || strings.HasPrefix(fd[1], ws+"/"))
	case "getdents64", "read", "readv", "pread64":
		fd := fdPath.FindStringSubmatch(call)
		return fd != nil && (fd[1] == ws || strings.HasPrefix(fd[1], ws+"/"))
	}
	if strings.Contains(call, ws+"/") {
		return true
	}
	if m := atCall.FindStringSubmatch(call); m != nil && m[1] == ws && m[2] != "" {
		return true
	}
	return false
}

var (
	fdPath = regexp.MustCompile(`^\w+\(\d+<([^>]*)>`)
	atCall = regexp.MustCompile(`^\w+at2?\(\d+<([^>]*)>, "([^"]*)"`)
)
