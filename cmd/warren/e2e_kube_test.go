package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sandbox/kube"
	"github.com/warrenhq/warren/sandbox/kube/kubetest"
	"github.com/warrenhq/warren/sessions/workspace/gittest"
)

// serve http --runner kubernetes, end to end: the built binary reaches a
// fake API server through its production client (--kubeconfig), real
// runners stand in for the sessions' pods, and a real MCP client makes a
// session from a git repository, reads the clone in the pod, writes, runs
// commands in the pod's shell, diffs, pauses (the Sandbox Suspended),
// resumes (cwd and exports kept) and deletes it (the Sandbox and its
// Secret gone).
func TestServeHTTPRunnerKubernetes(t *testing.T) {
	needJail(t) // the harness's pods are bwrap mount namespaces
	cl := kubetest.New(t, os.Getenv(sandbox.RunnerEnv))
	kubeconfig := cl.ServeAPI(t)
	repo, _, _ := gittest.Repo(t)
	srv := serveHTTP(t, "--data-dir", t.TempDir(), "--auth", "none", "--runner", "kubernetes", "--kubeconfig", kubeconfig,
		"--kube-namespace", kubetest.Namespace, "--kube-template", kubetest.Template,
		"--kube-runner-port", strconv.Itoa(cl.Port()))
	c := connectHTTP(t, srv, "")

	c.fails("session_create", map[string]any{"source": t.TempDir()}, "Kubernetes")
	id := c.ok("session_create", map[string]any{"source": repo, "mode": "clone"})["session_id"].(string)
	name, err := kube.Name(id)
	if err != nil {
		t.Fatal(err)
	}
	if !cl.Exists(kube.SandboxGVK, name) || !cl.Exists(kube.SecretGVK, name+"-tls") {
		t.Fatal("session_create made no Sandbox or no runner certificate")
	}
	if got := textOf(c.call("read_file", map[string]any{"session_id": id, "path": "README.md"})); !strings.Contains(got, "version two") {
		t.Fatalf("README.md read from the pod: %q", got)
	}
	c.ok("write_file", map[string]any{"session_id": id, "path": "notes.txt", "content": "written in the pod\n"})
	if b, err := os.ReadFile(cl.Workspace(name) + "/notes.txt"); err != nil || string(b) != "written in the pod\n" {
		t.Fatalf("notes.txt on the Sandbox's volume: %q %v", b, err)
	}
	if d := textOf(c.call("session_diff", map[string]any{"session_id": id})); !strings.Contains(d, "notes.txt") {
		t.Fatalf("the diff does not show notes.txt: %s", d)
	}
	if r := c.exec("cat notes.txt; mkdir -p sub && cd sub && export WHERE=pod", "session_id", id); r["stdout"] != "written in the pod\n" {
		t.Fatalf("a command in the pod: %v", r)
	}

	c.ok("session_control", map[string]any{"session_id": id, "action": "pause"})
	cl.WaitFor("the paused session's pod to stop", func() bool { return cl.PodPID(name) == 0 })
	c.ok("session_control", map[string]any{"session_id": id, "action": "resume"})
	if got := textOf(c.call("read_file", map[string]any{"session_id": id, "path": "notes.txt"})); !strings.Contains(got, "written in the pod") {
		t.Fatalf("after resume: %q", got)
	}
	if r := c.exec(`echo "$WHERE $PWD"`, "session_id", id); r["stdout"] != "pod /workspace/sub\n" {
		t.Fatalf("after resume the shell says %v", r)
	}
	if cl.Starts(name) != 2 {
		t.Fatalf("%d pods started, want a second one after resume", cl.Starts(name))
	}
	c.ok("session_control", map[string]any{"session_id": id, "action": "delete"})
	if cl.Exists(kube.SandboxGVK, name) || cl.Exists(kube.SecretGVK, name+"-tls") {
		t.Fatal("the deleted session's Sandbox or Secret is still there")
	}
}

// What --runner kubernetes refuses, with a message saying what to do.
func TestServeHTTPRunnerFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--runner", "docker"}, "want local or kubernetes"},
		{[]string{"--kube-namespace", "x"}, "is for --runner kubernetes"},
		{[]string{"--runner", "kubernetes", "--workspace", "."}, "leave it out"},
		{[]string{"--runner", "kubernetes", "--kubeconfig", "/nonexistent/kubeconfig", "--kube-namespace", "x"}, "/nonexistent/kubeconfig"},
	} {
		cmd := exec.Command(warrenBin, append([]string{"serve", "http", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, tc.args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG=")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("serve http %v: %v\n%s", tc.args, err, out)
		}
	}
}
