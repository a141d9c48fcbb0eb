package main

// Replicas of 'warren serve http --runner kubernetes' on one PostgreSQL
// and one fake cluster: the production shape of a Deployment with
// several warren pods.

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sandbox/kube"
	"github.com/warrenhq/warren/sandbox/kube/kubetest"
	"github.com/warrenhq/warren/sessions/sqlschema/sqltest"
	"github.com/warrenhq/warren/sessions/workspace/gittest"
)

// kubeReplicas is two replicas of serve http --runner kubernetes on one
// database, one data directory and one fake cluster.
type kubeReplicas struct {
	cl         *kubetest.Cluster
	data, db   string
	kubeconfig string
	tok        string
}

func newKubeReplicas(t *testing.T) *kubeReplicas {
	t.Helper()
	needJail(t) // the harness's pods are bwrap mount namespaces
	k := &kubeReplicas{cl: kubetest.New(t, os.Getenv(sandbox.RunnerEnv)), data: jailDir(t), db: sqltest.Shared(t).Fresh(t)}
	k.kubeconfig = k.cl.ServeAPI(t)
	k.tok = strings.TrimSpace(warren(t, "token", "create", "--user", "alice", "--data-dir", k.data, "--database", k.db))
	return k
}

// start starts the replica named id, with more flags.
func (k *kubeReplicas) start(t *testing.T, id string, more ...string) *httpServer {
	t.Helper()
	return serveHTTP(t, append([]string{"--data-dir", k.data, "--database", k.db, "--replica-id", id, "--lease-ttl", replicaTTL,
		"--runner", "kubernetes", "--kubeconfig", k.kubeconfig, "--kube-namespace", kubetest.Namespace,
		"--kube-template", kubetest.Template, "--kube-runner-port", strconv.Itoa(k.cl.Port()), "--auth", "none"}, more...)...)
}

// pair starts replicas A and B and makes a session through A with args:
// both replicas, A's client, the session and its Sandbox's name.
func (k *kubeReplicas) pair(t *testing.T, args map[string]any) (a, b *httpServer, c *rawMCP, id, name string) {
	t.Helper()
	a, b = k.start(t, "replica-a"), k.start(t, "replica-b")
	c = &rawMCP{t: t, url: a.url, token: k.tok}
	c.initialize()
	id, _ = c.must("session_create", args)["session_id"].(string)
	name, err := kube.Name(id)
	if err != nil {
		t.Fatal(err)
	}
	return a, b, c, id, name
}

// A session made through replica A is used through B and back: the
// pod's shell state (cwd, exports) and files follow, the pod is neither
// suspended nor made again by a handover (only the holder's connection
// closes, and its shell is gone before the new holder's command runs),
// the first content is written once, and a delete through the replica
// that does not hold the session removes its Sandbox for good.
func TestKubeReplicasShareOneSessionsPod(t *testing.T) {
	k := newKubeReplicas(t)
	repo, _, _ := gittest.Repo(t)
	a, b, c, id, name := k.pair(t, map[string]any{"source": repo, "mode": "clone"})
	out := c.must("shell_exec", map[string]any{"session_id": id,
		"command": "echo $$; grep -c two README.md; echo from-a > a.txt; echo seeded-by-a >> README.md; mkdir -p sub && cd sub && export WHERE=a"})
	var shellA int
	if _, err := fmt.Sscan(fmt.Sprint(out["stdout"]), &shellA); err != nil || !strings.HasSuffix(fmt.Sprint(out["stdout"]), "\n1\n") {
		t.Fatalf("the first command on A: %v", out)
	}

	c.url = b.url
	start := time.Now()
	out = c.must("shell_exec", map[string]any{"session_id": id,
		"command": fmt.Sprintf(`echo "$WHERE $PWD"; cat ../a.txt; tail -1 ../README.md; kill -0 %d 2>/dev/null && echo A-shell-alive; echo from-b > ../b.txt; export WHERE=b`, shellA)})
	moved := time.Since(start)
	if n := k.cl.Starts(name); n != 1 {
		t.Fatalf("%d pods started for the session: the handover to B suspended or remade the pod", n)
	}
	if out["stdout"] != "a /workspace/sub\nfrom-a\nseeded-by-a\n" {
		t.Fatalf("the session on B: %q (want A's cwd and export, A's files, the first content not written again, A's shell gone)", out["stdout"])
	}
	t.Logf("a call through the replica that does not hold the session (handover, dial, the command): %s", moved)

	c.url = a.url
	if got := fmt.Sprint(c.must("read_file", map[string]any{"session_id": id, "path": "b.txt"})["content"]); !strings.Contains(got, "from-b") {
		t.Fatalf("read_file on A of B's file: %q", got)
	}
	if out := c.must("shell_exec", map[string]any{"session_id": id, "command": `echo "$WHERE $PWD"`}); out["stdout"] != "b /workspace/sub\n" {
		t.Fatalf("back on A: %v", out)
	}
	if n := k.cl.Starts(name); n != 1 || k.cl.PodPID(name) == 0 {
		t.Fatalf("after the session came back to A: %d pods started, pod running %v", n, k.cl.PodPID(name) != 0)
	}

	// Paused through B while A holds the session: its pod stops (the
	// Sandbox suspended, whoever drove it); resumed and used through A, a
	// second pod on the same volume has the session's state.
	c.url = b.url
	c.must("session_control", map[string]any{"session_id": id, "action": "pause"})
	k.cl.WaitFor("the session paused through B to have its pod stopped", func() bool { return k.cl.PodPID(name) == 0 })
	c.url = a.url
	c.must("session_control", map[string]any{"session_id": id, "action": "resume"})
	if out := c.must("shell_exec", map[string]any{"session_id": id, "command": `echo "$WHERE $PWD"; cat ../b.txt`}); out["stdout"] != "b /workspace/sub\nfrom-b\n" {
		t.Fatalf("resumed on A: %v", out)
	}
	if n := k.cl.Starts(name); n != 2 {
		t.Fatalf("%d pods started after a pause and a resume, want 2", n)
	}

	// Deleted through B while A holds the session: gone, and A, which
	// loses the lease, does not make it again.
	c.url = b.url
	c.must("session_control", map[string]any{"session_id": id, "action": "delete"})
	if k.cl.Exists(kube.SandboxGVK, name) || k.cl.Exists(kube.SecretGVK, name+"-tls") {
		t.Fatal("the deleted session's Sandbox or Secret is still there")
	}
	k.cl.WaitFor("A to let the deleted session's lease go", func() bool {
		return strings.Contains(metricsOf(t, a, k.tok), "warren_session_leases_held 0")
	})
	if k.cl.Exists(kube.SandboxGVK, name) || k.cl.Exists(kube.SecretGVK, name+"-tls") {
		t.Fatal("the deleted session's Sandbox or Secret came back when A let it go")
	}
}

// A replica killed with SIGKILL while a client works through it: the
// other replica takes the session over in the same pod (not made again)
// with every acknowledged line, the last acknowledged cwd and export.
func TestKubeReplicaKilledMidLoadLosesNothingAcknowledged(t *testing.T) {
	k := newKubeReplicas(t)
	a, b, ca, id, name := k.pair(t, map[string]any{})
	const calls = 40
	acked := make(chan int, calls)
	go func() {
		defer close(acked)
		for i := 1; i <= calls; i++ {
			r := &rawMCP{t: t, url: a.url, token: k.tok, session: ca.session, nextID: 1000 * i}
			if _, msg := r.toolQuiet("shell_exec", map[string]any{"session_id": id,
				"command": fmt.Sprintf("mkdir -p /workspace/d%d && cd /workspace/d%d && export LAST=%d && echo line%d >> /workspace/log", i, i, i, i)}); msg != "" {
				return
			}
			acked <- i
		}
	}()
	last := 0
	for i := range acked {
		last = i
		if i == 5 {
			if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	if last < 5 || last == calls {
		t.Fatalf("the kill did not land mid-load: last acknowledged %d", last)
	}
	cb := &rawMCP{t: t, url: b.url, token: k.tok, session: ca.session}
	start := time.Now()
	out := cb.must("shell_exec", map[string]any{"session_id": id, "command": "pwd; echo $LAST; cat /workspace/log"})
	t.Logf("takeover with a kube runner (lease TTL %s): the first call on B took %s", replicaTTL, time.Since(start))
	lines := strings.Split(strings.TrimSpace(fmt.Sprint(out["stdout"])), "\n")
	var lastRun int
	fmt.Sscan(lines[min(1, len(lines)-1)], &lastRun)
	// A command sent as A died may have run without its answer.
	if lastRun < last || lastRun > last+1 || lines[0] != fmt.Sprintf("/workspace/d%d", lastRun) || len(lines) != 2+lastRun {
		t.Fatalf("after the takeover B's shell says %q; want cwd and LAST of command %d (or the next), and its lines", out["stdout"], last)
	}
	for i := 1; i <= lastRun; i++ {
		if lines[1+i] != fmt.Sprintf("line%d", i) {
			t.Fatalf("acknowledged line %d missing or out of order: %q", i, out["stdout"])
		}
	}
	if n := k.cl.Starts(name); n != 1 {
		t.Fatalf("%d pods started: the takeover remade the pod", n)
	}
}

// A replica frozen (SIGSTOP) past its lease while a command runs in the
// pod's shell: the replica that takes the session over connects to the
// same pod, and the frozen replica's shell and its command are gone
// before the new holder's first command runs (one shell drives the
// workspace).
func TestKubeFrozenReplicasCommandEndsAtTakeover(t *testing.T) {
	k := newKubeReplicas(t)
	a, b, c, id, name := k.pair(t, map[string]any{})
	c.must("shell_exec", map[string]any{"session_id": id, "command": "export X=first"})
	if out := c.must("shell_exec", map[string]any{"session_id": id, "yield_ms": 200,
		"command": "echo $$ > /workspace/stale.pid; sleep 120 & echo $! > /workspace/sleep.pid; wait; echo stale >> /workspace/log"}); out["running"] != true {
		t.Fatalf("the slow command ended early: %v", out)
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer a.cmd.Process.Signal(syscall.SIGCONT)
	c.url = b.url
	out := c.must("shell_exec", map[string]any{"session_id": id,
		"command": "echo $X; for p in $(cat /workspace/stale.pid /workspace/sleep.pid); do kill -0 $p 2>/dev/null && echo alive; done; echo fresh >> /workspace/log"})
	if out["stdout"] != "first\n" {
		t.Fatalf("B took over with %q: want the state saved before A froze, and A's shell and its command gone", out["stdout"])
	}
	if got, _ := os.ReadFile(k.cl.Workspace(name) + "/log"); string(got) != "fresh\n" {
		t.Fatalf("the log on the pod's volume: %q", got)
	}
	if n := k.cl.Starts(name); n != 1 {
		t.Fatalf("%d pods started: the takeover remade the pod", n)
	}
}

// Two replicas race to a session's first use (each a command that
// appends to a file of the first content): the first content is written
// into the pod once, before either command, so both appended lines are
// there, and the Sandbox says it holds its files.
func TestKubeReplicasRaceToTheFirstUseSeedOnce(t *testing.T) {
	k := newKubeReplicas(t)
	repo, _, _ := gittest.Repo(t)
	a, b, c, id, name := k.pair(t, map[string]any{"source": repo, "mode": "clone"})
	errc := make(chan string, 2)
	for i, srv := range []*httpServer{a, b} {
		go func() {
			r := &rawMCP{t: t, url: srv.url, token: k.tok, session: c.session, nextID: 1000 * (i + 1)}
			_, msg := r.toolQuiet("shell_exec", map[string]any{"session_id": id, "command": fmt.Sprintf("echo appended-%d >> README.md", i)})
			errc <- msg
		}()
	}
	for range 2 {
		if msg := <-errc; msg != "" {
			t.Fatalf("a first use: %s", msg)
		}
	}
	got, err := os.ReadFile(k.cl.Workspace(name) + "/README.md")
	if err != nil || !strings.Contains(string(got), "version two") || !strings.Contains(string(got), "appended-0\n") || !strings.Contains(string(got), "appended-1\n") {
		t.Fatalf("README.md in the pod after two first uses: %q %v (the first content written again over a command's change?)", got, err)
	}
	if v := k.cl.Sandbox(name).GetAnnotations()[kube.AnnotationSeeded]; v != "true" {
		t.Fatalf("the Sandbox's %s annotation: %q", kube.AnnotationSeeded, v)
	}
	if n := k.cl.Starts(name); n != 1 {
		t.Fatalf("%d pods started", n)
	}
}

// A replica given a data directory of its own (a pod's own volume
// instead of the shared one) refuses to start, saying what to do; one
// on the shared directory starts; the marker's id is the database's.
func TestReplicaOnAnotherDataDirectoryRefusesToStart(t *testing.T) {
	needJail(t)
	data, other := jailDir(t), jailDir(t)
	db := sqltest.Shared(t).Fresh(t)
	startReplica(t, data, db, "replica-a")
	cmd := exec.Command(warrenBin, "serve", "http", "--addr", "127.0.0.1:0", "--data-dir", other, "--database", db,
		"--replica-id", "replica-b", "--lease-ttl", replicaTTL)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is not the one the other replicas on this database use") ||
		!strings.Contains(string(out), "ReadWriteMany") {
		t.Fatalf("a replica on another data directory: %v\n%s", err, out)
	}
	startReplica(t, data, db, "replica-b") // the shared one
	// What the message says to do when the shared directory lost its
	// marker (the database's id written into it) is believed.
	id, err := os.ReadFile(filepath.Join(data, "replica-set-id"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "replica-set-id"), id, 0o644); err != nil {
		t.Fatal(err)
	}
	startReplica(t, other, db, "replica-c")
}

// The pods dial warren's egress proxy through its Service, which may
// send a connection to a replica that does not drive the session: that
// replica serves it with the session's allowlist as the database has it
// now (not closed for want of a shell there, and not with an allowlist
// it kept from before a change made through the other replica).
func TestKubeReplicasServeAPodsEgressWhicheverGetsIt(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from upstream")
	}))
	defer up.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "http://"))
	k := newKubeReplicas(t)
	if err := os.WriteFile(filepath.Join(k.data, "config.json"), []byte(`{"network": {"hosts": {"upstream.test": "127.0.0.1", "other.test": "127.0.0.1"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	// The Service sends every pod's connection to B.
	pa, pb := free(), free()
	a := k.start(t, "replica-a", "--kube-proxy-listen", pa, "--kube-proxy-addr", pb)
	b := k.start(t, "replica-b", "--kube-proxy-listen", pb, "--kube-proxy-addr", pb)
	c := &rawMCP{t: t, url: a.url, token: k.tok}
	c.initialize()
	id, _ := c.must("session_create", map[string]any{"network": map[string]any{"mode": "allowlist", "allow": []any{"upstream.test:" + port}}})["session_id"].(string)
	name, _ := kube.Name(id)
	c.must("shell_exec", map[string]any{"session_id": id, "command": "true"}) // the pod is up
	via := " -x http://" + net.JoinHostPort(k.cl.PodIP(name), strconv.Itoa(k.cl.EgressPort())) + " "
	curl := "curl -sS --max-time 20 -w ' %{http_code}'" + via + "http://upstream.test:" + port + "/"
	if out := c.must("shell_exec", map[string]any{"session_id": id, "command": curl}); out["stdout"] != "hello from upstream 200" {
		t.Fatalf("the allowed host from the pod driven by A, through B's proxy: %v", out)
	}
	// B drives the session for a moment (its proxy state is made), then A
	// again; the allowlist changes through A.
	c.url = b.url
	c.must("shell_exec", map[string]any{"session_id": id, "command": "true"})
	c.url = a.url
	c.must("session_control", map[string]any{"session_id": id, "action": "network",
		"network": map[string]any{"mode": "allowlist", "allow": []any{"other.test:" + port}}})
	out := c.must("shell_exec", map[string]any{"session_id": id, "command": curl})
	if so := fmt.Sprint(out["stdout"]); !strings.HasSuffix(so, " 403") {
		t.Fatalf("the host taken off the allowlist through A, through B's proxy: %v", out)
	}
	other := strings.Replace(curl, "upstream.test", "other.test", 1)
	if out := c.must("shell_exec", map[string]any{"session_id": id, "command": other}); out["stdout"] != "hello from upstream 200" {
		t.Fatalf("the host put on the allowlist through A, through B's proxy: %v", out)
	}
}
