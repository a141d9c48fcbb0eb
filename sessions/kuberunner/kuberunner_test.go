package kuberunner_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/ncruces/go-sqlite3/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/warrenhq/warren/sandbox/kube"
	"github.com/warrenhq/warren/sandbox/kube/kubetest"
	"github.com/warrenhq/warren/sandbox/runner/runnertest"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/sessions/kuberunner"
	"github.com/warrenhq/warren/sessions/workspace/gittest"
)

// runnerBin is the runner runnertest.Main built for the pods' runners.
var runnerBin string

func TestMain(m *testing.M) { os.Exit(runnertest.Main(m, &runnerBin)) }

// server is a session manager whose sessions run in the fake cluster: one
// serve http --runner kubernetes, as far as sessions go.
type server struct {
	m    *sessions.Manager
	sbs  *kube.Sandboxes
	data string
}

func newServer(t *testing.T, cl *kubetest.Cluster, data string) *server {
	t.Helper()
	return newServerWith(t, cl, kubeConfig(cl), data)
}

// kubeConfig is the kube.Config of sessions in the fake cluster.
func kubeConfig(cl *kubetest.Cluster) kube.Config {
	return kube.Config{Namespace: kubetest.Namespace, Template: kubetest.Template, Port: cl.Port(), PollEvery: kubetest.PollEvery}
}

// newServerWith is newServer with the cluster's settings changed (a warm
// pool); like serve, it prepares what sandboxes need before the first.
func newServerWith(t *testing.T, cl *kubetest.Cluster, kcfg kube.Config, data string) *server {
	t.Helper()
	return newServerCfg(t, cl, kcfg, sessions.Config{}, data)
}

// newServerCfg is newServerWith with the manager's settings.
func newServerCfg(t *testing.T, cl *kubetest.Cluster, kcfg kube.Config, cfg sessions.Config, data string) *server {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(data, "warren.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := sessions.NewStore(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	sbs, err := kube.New(cl.API(), kcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sbs.Prepare(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	cfg.DataDir, cfg.AllowLocalSources = data, true
	kuberunner.Configure(&cfg, sbs)
	m, err := sessions.NewManager(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return &server{m: m, sbs: sbs, data: data}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (s *server) read(t *testing.T, id, path string) string {
	t.Helper()
	_, f, err := s.m.OpenFiles(ctxFor(t), "alice", id, false)
	if err != nil {
		t.Fatalf("open the files of %s: %v", id, err)
	}
	c, err := f.Read(ctxFor(t), path, 1<<20)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(c.Data)
}

func (s *server) write(t *testing.T, id, path, data string) {
	t.Helper()
	_, f, err := s.m.OpenFiles(ctxFor(t), "alice", id, true)
	if err != nil {
		t.Fatalf("open the files of %s: %v", id, err)
	}
	if _, err := f.Write(ctxFor(t), path, []byte(data), sessions.WriteOptions{}); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

func (s *server) exec(t *testing.T, id, command string) sessions.CommandResult {
	t.Helper()
	o, err := s.m.Exec(ctxFor(t), "alice", id, command, sessions.ExecOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	if o.Running || o.StateErr != nil {
		t.Fatalf("%s: running %v, state %v", command, o.Running, o.StateErr)
	}
	return o.Result
}

func mode(cl *kubetest.Cluster, name string) string {
	sb := cl.Sandbox(name)
	if sb == nil {
		return ""
	}
	m, _, _ := unstructured.NestedString(sb.Object, "spec", "operatingMode")
	return m
}

// A session's life with --runner kubernetes, against a fake API server
// and real runners standing in for pods: made from a directory (whose
// content reaches the pod's volume), used (files, diff), paused (its
// Sandbox Suspended, its pod gone) and resumed (a new pod over the same
// volume), re-opened by a restarted server without its first content
// written again, carried on after its pod died and came back, and deleted
// (Sandbox and Secret gone).
func TestKubernetesSessionLife(t *testing.T) {
	cl := kubetest.New(t, runnerBin)
	data := t.TempDir()
	src, _, _ := gittest.Repo(t)
	gittest.Write(t, src, "sub/deeper/a.txt", "a\n")
	if err := os.Symlink("sub/deeper/a.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	git := gittest.Git(t, src)
	git("add", "-A")
	git("commit", "-q", "-m", "more")
	srv := newServer(t, cl, data)
	// A directory cannot be bound where the workspace is not on this host.
	if _, err := srv.m.Create(ctxFor(t), "alice", sessions.CreateOptions{Source: t.TempDir()}); errs.CodeOf(err) != errs.Invalid ||
		!strings.Contains(err.Error(), "Kubernetes") {
		t.Fatalf("binding a directory: %v", err)
	}
	// Nor can a pod be given a network it would not have.
	// The error says what applies to sessions in pods, never a flag that
	// does nothing with --runner kubernetes.
	for _, c := range []struct {
		n    sessions.Network
		want string
	}{
		{sessions.Network{Mode: sessions.NetAllowlist, Allow: []string{"github.com"}}, "--kube-proxy-listen"},
		{sessions.Network{Mode: sessions.NetHost}, "Kubernetes"},
	} {
		_, err := srv.m.Create(ctxFor(t), "alice", sessions.CreateOptions{Source: src, Network: &c.n})
		if errs.CodeOf(err) != errs.Invalid || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "--allow-host-network") {
			t.Fatalf("a session with network %s: %v (want an error naming %s)", c.n.Mode, err, c.want)
		}
	}
	s, err := srv.m.Create(ctxFor(t), "alice", sessions.CreateOptions{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	if s.Mode != sessions.ModeClone {
		t.Fatalf("the session is a %s", s.Mode)
	}
	name, _ := kube.Name(s.ID)
	if !cl.Exists(kube.SandboxGVK, name) || !cl.Exists(kube.SecretGVK, name+"-tls") {
		t.Fatal("creating the session made no Sandbox or no runner certificate")
	}

	// Used: the first content is in the pod's volume, read through its runner.
	if got := srv.read(t, s.ID, "sub/deeper/a.txt"); got != "a\n" {
		t.Fatalf("a.txt in the pod: %q", got)
	}
	if got := srv.read(t, s.ID, "README.md"); got != "version two\n" {
		t.Fatalf("README.md in the pod: %q", got)
	}
	if got := srv.read(t, s.ID, ".git/HEAD"); !strings.HasPrefix(got, "ref: refs/heads/main") {
		t.Fatalf("the clone's .git/HEAD in the pod: %q", got)
	}
	if got := srv.read(t, s.ID, "link"); got != "a\n" {
		t.Fatalf("the link in the pod reads %q", got)
	}
	sb := cl.Sandbox(name)
	if sb == nil || sb.GetLabels()[kube.LabelSession] != s.ID || sb.GetAnnotations()[kube.AnnotationSeeded] != "true" {
		t.Fatalf("the session's Sandbox: %v", sb)
	}
	if res := srv.exec(t, s.ID, "cat README.md && cd sub && export GREETING=hi"); string(res.Stdout) != "version two\n" || res.Cwd != "/workspace/sub" {
		t.Fatalf("a command in the pod: %q in %s", res.Stdout, res.Cwd)
	}
	srv.write(t, s.ID, "notes/new.txt", "made in the pod\n")
	if b, err := os.ReadFile(filepath.Join(cl.Workspace(name), "notes/new.txt")); err != nil || string(b) != "made in the pod\n" {
		t.Fatalf("the write is not on the Sandbox's volume: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(data, "workspaces", s.ID, "notes")); err == nil {
		t.Fatal("the write landed in the server's copy of the workspace")
	}
	_, d, err := srv.m.Diff(ctxFor(t), "alice", s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 1 || d.Files[0].Path != "notes/new.txt" || d.Files[0].Status != "added" {
		t.Fatalf("the diff: %+v", d.Files)
	}

	// Paused: the Sandbox is Suspended and its pod goes; resumed: a new pod.
	if _, err := srv.m.Pause(ctxFor(t), "alice", s.ID); err != nil {
		t.Fatal(err)
	}
	if m := mode(cl, name); m != kube.ModeSuspended {
		t.Fatalf("a paused session's Sandbox is %q", m)
	}
	cl.WaitFor("the paused session's pod to stop", func() bool { return cl.PodPID(name) == 0 })
	if _, err := srv.m.Resume(ctxFor(t), "alice", s.ID); err != nil {
		t.Fatal(err)
	}
	if res := srv.exec(t, s.ID, `echo "$GREETING $PWD"; cat ../notes/new.txt`); string(res.Stdout) != "hi /workspace/sub\nmade in the pod\n" {
		t.Fatalf("after resume: %q", res.Stdout)
	}
	srv.write(t, s.ID, "README.md", "changed after resume\n")
	if m := mode(cl, name); m != kube.ModeRunning || cl.Starts(name) != 2 {
		t.Fatalf("after resume the Sandbox is %q with %d pods started", m, cl.Starts(name))
	}

	// A restarted server finds the session's Sandbox by its id and does
	// not write the first content over what the session did.
	srv.m.Close(ctxFor(t))
	srv = newServer(t, cl, data)
	if got := srv.read(t, s.ID, "README.md"); got != "changed after resume\n" {
		t.Fatalf("after a restart README.md reads %q", got)
	}
	if res := srv.exec(t, s.ID, `echo "$GREETING $PWD"`); string(res.Stdout) != "hi /workspace/sub\n" {
		t.Fatalf("after a restart the shell's state is %q", res.Stdout)
	}
	if n := len(cl.Sandboxes()); n != 1 {
		t.Fatalf("%d Sandboxes after a restart, want the session's one", n)
	}

	// The pod dies and comes back over its volume, once while a command
	// runs (which ends, saying its shell restarted) and once between
	// commands: the session goes on.
	before := cl.Starts(name)
	done := make(chan sessions.Outcome, 1)
	go func() {
		o, err := srv.m.Exec(ctxFor(t), "alice", s.ID, "touch ../running; sleep 30", sessions.ExecOptions{Timeout: time.Minute})
		if err != nil {
			t.Error(err)
		}
		done <- o
	}()
	cl.WaitFor("the command to start", func() bool {
		_, err := os.Stat(filepath.Join(cl.Workspace(name), "running"))
		return err == nil
	})
	cl.KillPod(name)
	if o := <-done; o.Running || !o.Result.ShellRestarted {
		t.Fatalf("a command whose pod died: %+v", o.Result)
	}
	cl.WaitFor("a new pod", func() bool { return cl.Starts(name) > before && cl.PodPID(name) != 0 })
	if res := srv.exec(t, s.ID, `echo "$GREETING $PWD"`); string(res.Stdout) != "hi /workspace/sub\n" {
		t.Fatalf("after the pod died under a command: %q", res.Stdout)
	}
	before = cl.Starts(name)
	cl.KillPod(name)
	cl.WaitFor("a new pod", func() bool { return cl.Starts(name) > before && cl.PodPID(name) != 0 })
	if got := srv.read(t, s.ID, "notes/new.txt"); got != "made in the pod\n" {
		t.Fatalf("after the pod came back: %q", got)
	}
	if res := srv.exec(t, s.ID, `echo "$GREETING $PWD" > ../after-crash.txt; cat ../after-crash.txt`); string(res.Stdout) != "hi /workspace/sub\n" {
		t.Fatalf("a command after the pod came back: %q", res.Stdout)
	}

	// Archived: its Sandbox is suspended, its volume kept for reads.
	other, err := srv.m.Create(ctxFor(t), "alice", sessions.CreateOptions{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	otherName, _ := kube.Name(other.ID)
	srv.exec(t, other.ID, "echo kept > kept.txt")
	if _, err := srv.m.Archive(ctxFor(t), "alice", other.ID); err != nil {
		t.Fatal(err)
	}
	if m := mode(cl, otherName); m != kube.ModeSuspended {
		t.Fatalf("an archived session's Sandbox is %q", m)
	}

	// Deleted: the Sandbox and its certificate go.
	if _, err := srv.m.Delete(ctxFor(t), "alice", s.ID); err != nil {
		t.Fatal(err)
	}
	if cl.Exists(kube.SandboxGVK, name) || cl.Exists(kube.SecretGVK, name+"-tls") {
		t.Fatal("the deleted session's Sandbox or Secret is still there")
	}
	cl.WaitFor("the deleted session's pod to stop", func() bool { return cl.PodPID(name) == 0 })
}
