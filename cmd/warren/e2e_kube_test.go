package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
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
		{[]string{"--kube-proxy-listen", "127.0.0.1:0"}, "is for --runner kubernetes"},
		{[]string{"--runner", "kubernetes", "--kube-namespace", "x", "--kube-proxy-listen", "127.0.0.1:0"}, "go together"},
	} {
		cmd := exec.Command(warrenBin, append([]string{"serve", "http", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, tc.args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG=")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("serve http %v: %v\n%s", tc.args, err, out)
		}
	}
}

// serve http --runner kubernetes --kube-proxy-listen, end to end: a
// session in network mode allowlist, in a fake cluster's pod, reaches an
// allowed host through the pod's runner and warren's egress proxy (mutual
// TLS, the session's certificate), is refused another, and
// session_network_log lists both; the host's network stays refused.
func TestServeHTTPRunnerKubernetesAllowlist(t *testing.T) {
	needJail(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from upstream")
	}))
	defer up.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "http://"))
	cl := kubetest.New(t, os.Getenv(sandbox.RunnerEnv))
	kubeconfig := cl.ServeAPI(t)
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(`{"network": {"hosts": {"upstream.test": "127.0.0.1"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxy := ln.Addr().String()
	ln.Close()
	srv := serveHTTP(t, "--data-dir", data, "--auth", "none", "--runner", "kubernetes", "--kubeconfig", kubeconfig,
		"--kube-namespace", kubetest.Namespace, "--kube-template", kubetest.Template,
		"--kube-runner-port", strconv.Itoa(cl.Port()), "--kube-proxy-listen", proxy, "--kube-proxy-addr", proxy)
	c := connectHTTP(t, srv, "")

	c.fails("session_create", map[string]any{"network": map[string]any{"mode": "host"}}, "host")
	s := c.ok("session_create", map[string]any{"network": map[string]any{"mode": "allowlist", "allow": []any{"upstream.test:" + port}}})
	id := s["session_id"].(string)
	name, _ := kube.Name(id)
	if r := c.exec(`printf '%s' "$HTTP_PROXY"`, "session_id", id); r["stdout"] != "http://127.0.0.1:3128" {
		t.Fatalf("the session's HTTP_PROXY: %v", r)
	}
	// The fake cluster's pods share this host's network: the pod's
	// 127.0.0.1:3128 is its own address here.
	via := " -x http://" + net.JoinHostPort(cl.PodIP(name), strconv.Itoa(cl.EgressPort())) + " "
	if r := c.exec("curl -sS --max-time 20"+via+"http://upstream.test:"+port+"/", "session_id", id); r["stdout"] != "hello from upstream" {
		t.Fatalf("the allowed host from the pod: %v", r)
	}
	r := c.exec("curl -sS --max-time 20 -w ' %{http_code}'"+via+"http://other.test:"+port+"/", "session_id", id)
	if so := r["stdout"].(string); !strings.HasSuffix(so, " 403") || !strings.Contains(so, "not in the session's allowlist") {
		t.Fatalf("the denied host from the pod: %v", r)
	}
	var got []string
	for _, d := range c.ok("session_network_log", map[string]any{"session_id": id})["decisions"].([]any) {
		d := d.(map[string]any)
		got = append(got, fmt.Sprintf("%v:%v %v", d["host"], d["port"], d["allowed"]))
	}
	if want := []string{"upstream.test:" + port + " true", "other.test:" + port + " false"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("session_network_log: %q, want %q", got, want)
	}
}

// serve http --runner kubernetes runs in an image without bwrap
// (warren's pod: sessions run in their Sandboxes): /readyz, which the
// Deployment's readiness probe asks, checks that the database and the
// cluster answer, and does not try a local jail, which would fail there
// and keep the pod out of its Service forever.
func TestServeHTTPRunnerKubernetesIsReadyWithoutBwrap(t *testing.T) {
	cl := kubetest.New(t, os.Getenv(sandbox.RunnerEnv), kubetest.Plain)
	kubeconfig := cl.ServeAPI(t)
	srv := serveHTTP(t, "--data-dir", t.TempDir(), "--auth", "none", "--runner", "kubernetes", "--kubeconfig", kubeconfig,
		"--kube-namespace", kubetest.Namespace, "--kube-template", kubetest.Template,
		"--kube-runner-port", strconv.Itoa(cl.Port()))
	resp, err := http.Get(strings.TrimSuffix(srv.url, "/mcp") + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "ok   Kubernetes API answers") || strings.Contains(string(body), "jails start") {
		t.Fatalf("/readyz of a kubernetes runner without bwrap: %d\n%s", resp.StatusCode, body)
	}
}
