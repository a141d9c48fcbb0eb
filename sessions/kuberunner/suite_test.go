package kuberunner_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sandbox/kube"
	"github.com/warrenhq/warren/sandbox/kube/kubetest"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/kuberunner"
	"github.com/warrenhq/warren/sessions/runnersuite"
	"github.com/warrenhq/warren/sessions/workspace/gittest"
)

// The runner conformance suite against runners in the fake cluster's
// pods: each runner a session of its own, its Sandbox made from the
// deployment's template, its commands in the pod's runner's shell.
func TestKubeRunnerConformance(t *testing.T) {
	cl := kubetest.New(t, runnerBin)
	sbs, err := kube.New(cl.API(), kubeConfig(cl))
	if err != nil {
		t.Fatal(err)
	}
	newRunner := kuberunner.New(sbs)
	runnersuite.Run(t, func(t *testing.T, st sessions.ShellState) sessions.Runner {
		dir := t.TempDir()
		ws, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		id, saved := sessions.NewID(), sandbox.State(st)
		r, err := newRunner(sandbox.DefaultProfile(dir), sandbox.Options{Session: id, State: &saved, Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := kuberunner.Remove(sbs)(context.Background(), id); err != nil {
				t.Error(err)
			}
		})
		return r
	})
}

// With a warm pool, a session claims a Sandbox the pool made (named after
// the pool, not the session), gets its first content and runs its
// commands there, and gives it back on delete.
func TestKubernetesSessionFromAWarmPool(t *testing.T) {
	cl := kubetest.New(t, runnerBin)
	kcfg := kubeConfig(cl)
	kcfg.WarmPool = "warren-warm"
	srv := newServerWith(t, cl, kcfg, t.TempDir())
	src, _, _ := gittest.Repo(t)
	s, err := srv.m.Create(ctxFor(t), "alice", sessions.CreateOptions{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	claim, _ := kube.Name(s.ID)
	name := cl.Claimed(claim)
	if name == "" || name == claim || !cl.Exists(kube.ClaimGVK, claim) {
		t.Fatalf("the session's claim %s got the Sandbox %q", claim, name)
	}
	if res := srv.exec(t, s.ID, "cat README.md; pwd"); string(res.Stdout) != "version two\n/workspace\n" {
		t.Fatalf("a command in the pool's pod: %q", res.Stdout)
	}
	if sb := cl.Sandbox(name); sb == nil || sb.GetAnnotations()[kube.AnnotationSeeded] != "true" {
		t.Fatalf("the pool's Sandbox is not marked as holding the session's files: %v", sb)
	}
	if _, err := srv.m.Delete(ctxFor(t), "alice", s.ID); err != nil {
		t.Fatal(err)
	}
	if cl.Exists(kube.ClaimGVK, claim) {
		t.Fatal("the deleted session's claim is still there")
	}
	cl.WaitFor("the claimed Sandbox to go", func() bool { return !cl.Exists(kube.SandboxGVK, name) })
}

// A session left idle past the idle timeout has its Sandbox suspended (its
// pod stopped) by the reaper, and its next command resumes it with its
// cwd and exports.
func TestIdleKubernetesSessionIsSuspended(t *testing.T) {
	cl := kubetest.New(t, runnerBin)
	srv := newServerCfg(t, cl, kubeConfig(cl), sessions.Config{IdleTimeout: 300 * time.Millisecond}, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv.m.StartReaper(ctx)
	src, _, _ := gittest.Repo(t)
	s, err := srv.m.Create(ctxFor(t), "alice", sessions.CreateOptions{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	name, _ := kube.Name(s.ID)
	srv.exec(t, s.ID, "export IDLE=yes")
	cl.WaitFor("the idle session's Sandbox to be suspended", func() bool { return mode(cl, name) == kube.ModeSuspended })
	cl.WaitFor("the idle session's pod to stop", func() bool { return cl.PodPID(name) == 0 })
	// (The reaper may suspend it again at once: the pods started tell.)
	if res := srv.exec(t, s.ID, "echo $IDLE"); string(res.Stdout) != "yes\n" || cl.Starts(name) != 2 {
		t.Fatalf("after the idle stop: %q, %d pods started", res.Stdout, cl.Starts(name))
	}
}
