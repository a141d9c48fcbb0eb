// Package kubetest is a fake Kubernetes cluster for tests of warren's
// Kubernetes sessions: controller-runtime's fake API server, and a harness
// that does what the agent-sandbox controller and the kubelet would. A
// Sandbox in Running mode gets a "pod": a real warren-runner --listen
// process in a bwrap mount namespace where the Sandbox's volume is at
// /workspace and /home/warren (as the SandboxTemplate's volume mounts put
// it) and the Secret of its warren-tls volume at the template's mount
// path, listening on an address of its own (127.0.0.N, the template's
// port). Suspended stops the process; a process that dies is started
// again on another address over the same volume, as a pod is.
//
// It is for tests only: nothing in warren's binaries imports it.
package kubetest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/warrenhq/warren/sandbox/kube"
)

// Namespace is where the fake cluster's sandboxes live; Template the
// SandboxTemplate it holds (the deployment's, sandbox/kube/deploy).
const (
	Namespace = "warren-test"
	Template  = "warren-session"
)

// Cluster is one fake cluster. Its pods run until the test ends.
type Cluster struct {
	t      testing.TB
	c      ctrl.WithWatch
	runner string // the warren-runner binary
	port   int
	root   string

	// rec serializes the rounds of reconcile with what a pod's end
	// writes, so that a dead pod's status never lands after its
	// successor's.
	rec sync.Mutex

	mu      sync.Mutex
	pods    map[string]*pod   // by Sandbox name
	volumes map[string]string // by Sandbox name: the "PVC"
	nextIP  int
	starts  map[string]int // pods started, by Sandbox name
	// claims are the warm pool's: the Sandbox each SandboxClaim got.
	claims   map[string]string
	nextWarm int
}

// New starts a fake cluster whose pods run the warren-runner binary
// runnerBin, with the deployment's SandboxTemplate applied.
func New(t testing.TB, runnerBin string) *Cluster {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap is not installed: the fake cluster's pods are bwrap mount namespaces (run 'just deps'; CI installs it)")
	}
	if runnerBin == "" {
		t.Fatal("no warren-runner binary for the fake cluster's pods (build it with runnertest.Build)")
	}
	scheme := kruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	sb := &unstructured.Unstructured{}
	sb.SetGroupVersionKind(kube.SandboxGVK)
	claim := &unstructured.Unstructured{}
	claim.SetGroupVersionKind(kube.ClaimGVK)
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(sb, claim).Build()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cl := &Cluster{t: t, c: c, runner: runnerBin, port: port, root: t.TempDir(), pods: map[string]*pod{},
		volumes: map[string]string{}, nextIP: 1, starts: map[string]int{}, claims: map[string]string{}}
	cl.applyTemplate()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.reconcile(ctx)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		cl.mu.Lock()
		defer cl.mu.Unlock()
		for _, p := range cl.pods {
			p.kill()
		}
	})
	return cl
}

// Config is the kube.Config of sessions in this cluster.
func (cl *Cluster) Config() kube.Config {
	return kube.Config{Namespace: Namespace, Template: Template, Port: cl.port, PollEvery: 20 * time.Millisecond}
}

// API is the cluster's API as sandbox/kube uses it.
func (cl *Cluster) API() kube.API { return ctrlAPI{cl.c} }

// Client is the fake API server's client, to look at what warren made.
func (cl *Cluster) Client() ctrl.Client { return cl.c }

// Exists reports whether the object of kind gvk named name is in the
// cluster's namespace.
func (cl *Cluster) Exists(gvk schema.GroupVersionKind, name string) bool {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := cl.c.Get(context.Background(), ctrl.ObjectKey{Namespace: Namespace, Name: name}, u)
	if err != nil && !apierrors.IsNotFound(err) {
		cl.t.Fatal(err)
	}
	return err == nil
}

// Sandbox is the Sandbox named name, or nil.
func (cl *Cluster) Sandbox(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kube.SandboxGVK)
	if err := cl.c.Get(context.Background(), ctrl.ObjectKey{Namespace: Namespace, Name: name}, u); err != nil {
		return nil
	}
	return u
}

// PodPID is the runner process of the Sandbox's pod, or 0 when it has none.
func (cl *Cluster) PodPID(name string) int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if p := cl.pods[name]; p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// Starts counts the pods the Sandbox has had.
func (cl *Cluster) Starts(name string) int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.starts[name]
}

// KillPod kills the Sandbox's pod, as a node that fails; the harness
// starts another over the same volume.
func (cl *Cluster) KillPod(name string) {
	cl.mu.Lock()
	p := cl.pods[name]
	cl.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// Workspace is where the Sandbox's pod sees /workspace, on this host (""
// before its first pod).
func (cl *Cluster) Workspace(name string) string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if v, ok := cl.volumes[name]; ok {
		return filepath.Join(v, "workspace")
	}
	return ""
}

// WaitFor polls cond until it holds, failing the test after a minute.
func (cl *Cluster) WaitFor(what string, cond func() bool) {
	cl.t.Helper()
	for i := 0; !cond(); i++ {
		if i > 3000 {
			cl.t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// applyTemplate creates the deployment's SandboxTemplate.
func (cl *Cluster) applyTemplate() {
	_, self, _, _ := runtime.Caller(0)
	file := filepath.Join(filepath.Dir(self), "..", "deploy", "sandbox-template.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		cl.t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(strings.TrimSpace(string(b))), &m); err != nil {
		cl.t.Fatalf("%s: %v", file, err)
	}
	tmpl := &unstructured.Unstructured{Object: m}
	if tmpl.GroupVersionKind() != kube.TemplateGVK {
		cl.t.Fatalf("%s holds no SandboxTemplate", file)
	}
	tmpl.SetNamespace(Namespace)
	tmpl.SetName(Template)
	if err := cl.c.Create(context.Background(), tmpl); err != nil {
		cl.t.Fatal(err)
	}
}

// ctrlAPI is kube.API through controller-runtime's client: the fake API
// server's status subresource and resourceVersion conflicts behave as a
// real one's.
type ctrlAPI struct{ c ctrl.Client }

func (a ctrlAPI) Get(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, a.c.Get(ctx, ctrl.ObjectKey{Namespace: ns, Name: name}, u)
}

func (a ctrlAPI) Create(ctx context.Context, obj *unstructured.Unstructured) error {
	return a.c.Create(ctx, obj)
}

func (a ctrlAPI) MergePatch(ctx context.Context, gvk schema.GroupVersionKind, ns, name string, patch []byte) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return a.c.Patch(ctx, u, ctrl.RawPatch(types.MergePatchType, patch))
}

func (a ctrlAPI) Delete(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return a.c.Delete(ctx, u, ctrl.PropagationPolicy("Background"))
}

// Sandboxes lists the names of the Sandboxes in the namespace.
func (cl *Cluster) Sandboxes() []string {
	var out []string
	for _, sb := range cl.sandboxes(context.Background()) {
		out = append(out, sb.GetName())
	}
	return out
}
