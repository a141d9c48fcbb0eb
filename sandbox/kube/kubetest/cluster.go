// Package kubetest is a fake Kubernetes cluster for tests of warren's
// Kubernetes sessions: controller-runtime's fake API server, and a harness
// that does what the agent-sandbox controller and the kubelet would. A
// Sandbox in Running mode gets a "pod": a real warren-runner --listen
// process with the container's arguments from the Sandbox's pod template,
// listening on an address of its own (127.0.0.N, the template's port),
// in a bwrap mount namespace where the Sandbox's volume is where the
// template mounts it (/workspace, /home/warren) and the Secret of its
// warren-tls volume at its mount path (or, with Plain, as a plain process
// working in the volume's directory). Suspended stops the process; a
// process that dies is started again on another address over the same
// volume, as a pod is. A SandboxClaim gets a Sandbox as from a warm pool.
//
// It is for tests only: nothing in warren's binaries imports it, and it
// imports no warren package, so that sandbox/kube's own tests use it.
package kubetest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
)

// Namespace is where the fake cluster's sandboxes live; Template the
// SandboxTemplate it holds (the deployment's, sandbox/kube/deploy);
// PollEvery how often warren should read a Sandbox again in it.
const (
	Namespace = "warren-test"
	Template  = "warren-session"
	PollEvery = 20 * time.Millisecond
)

// The agent-sandbox API the harness plays (v1beta1 of v0.5.6) and what
// warren's pod template and warren agree on. This package does not import
// sandbox/kube, whose own tests use it; they check these against it.
var (
	SandboxGVK  = schema.GroupVersionKind{Group: "agents.x-k8s.io", Version: "v1beta1", Kind: "Sandbox"}
	TemplateGVK = schema.GroupVersionKind{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Kind: "SandboxTemplate"}
	ClaimGVK    = schema.GroupVersionKind{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Kind: "SandboxClaim"}
	SecretGVK   = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
)

// TLSVolume is the pod volume that holds a runner's certificate Secret.
const TLSVolume = "warren-tls"

// PoolSecret is the Secret a warm pool's pods mount as TLSVolume.
func PoolSecret(pool string) string { return pool + "-tls" }

const (
	modeRunning   = "Running"
	modeSuspended = "Suspended"
)

// Option changes how the cluster runs its pods.
type Option func(*Cluster)

// Plain runs each pod's runner as a plain process working in the
// Sandbox's volume directory (Volume), without a mount namespace: for
// tests of the adapter that tell pods apart by the runner's pid and look
// at where it works. Without it the runner sees the volume at /workspace
// and /home/warren, as the template mounts it.
func Plain(cl *Cluster) { cl.plain = true }

// Cluster is one fake cluster. Its pods run until the test ends.
type Cluster struct {
	t      testing.TB
	c      ctrl.WithWatch
	runner string // the warren-runner binary
	port   int
	// egressPort is where a pod's runner listens for its egress, on
	// the pod's own address (the template's 127.0.0.1:3128 is one
	// loopback for all pods here).
	egressPort int
	root       string
	plain      bool

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
	// secretOf, when set for a Sandbox, makes its pod mount another
	// Secret than the one its spec names (an impostor).
	secretOf map[string]string
	// hold keeps a Sandbox's pod from starting (a node that has no room).
	hold map[string]bool
}

// New starts a fake cluster whose pods run the warren-runner binary
// runnerBin, with the deployment's SandboxTemplate applied.
func New(t testing.TB, runnerBin string, opts ...Option) *Cluster {
	t.Helper()
	cl := &Cluster{t: t, runner: runnerBin, pods: map[string]*pod{}, volumes: map[string]string{}, nextIP: 1,
		starts: map[string]int{}, claims: map[string]string{}, secretOf: map[string]string{}, hold: map[string]bool{}}
	for _, o := range opts {
		o(cl)
	}
	if _, err := exec.LookPath("bwrap"); err != nil && !cl.plain {
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
	sb.SetGroupVersionKind(SandboxGVK)
	claim := &unstructured.Unstructured{}
	claim.SetGroupVersionKind(ClaimGVK)
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(sb, claim).Build()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	eln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl.egressPort = eln.Addr().(*net.TCPAddr).Port
	eln.Close()
	cl.c, cl.port, cl.root = c, port, t.TempDir()
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

// Port is where the pods' runners listen (the template's port, on each
// pod's own address).
func (cl *Cluster) Port() int { return cl.port }

// EgressPort is where the pods' runners listen for their egress (when
// the Sandbox's runner forwards it), on each pod's own address (PodIP):
// a pod's 127.0.0.1:3128.
func (cl *Cluster) EgressPort() int { return cl.egressPort }

// API is the cluster's API as sandbox/kube uses it (its kube.API).
func (cl *Cluster) API() API { return API{cl.c} }

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
	u.SetGroupVersionKind(SandboxGVK)
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
	if v := cl.Volume(name); v != "" {
		return filepath.Join(v, "workspace")
	}
	return ""
}

// Volume is the directory that stands for the Sandbox's volume claim (""
// before its first pod); the template mounts its subdirectories.
func (cl *Cluster) Volume(name string) string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.volumes[name]
}

// PodIP is the address of the Sandbox's pod ("" when it has none).
func (cl *Cluster) PodIP(name string) string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if p := cl.pods[name]; p != nil {
		return p.ip
	}
	return ""
}

// Hold keeps the Sandbox's pods from starting (on), as a cluster without
// room, or lets them start again.
func (cl *Cluster) Hold(name string, on bool) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.hold[name] = on
}

// MountSecret makes the Sandbox's pods mount the Secret secret as their
// certificate instead of the one the Sandbox names: an impostor.
func (cl *Cluster) MountSecret(name, secret string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.secretOf[name] = secret
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
	file := filepath.Join(moduleRoot(cl.t), "sandbox", "kube", "deploy", "sandbox-template.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		cl.t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(strings.TrimSpace(string(b))), &m); err != nil {
		cl.t.Fatalf("%s: %v", file, err)
	}
	tmpl := &unstructured.Unstructured{Object: m}
	if tmpl.GroupVersionKind() != TemplateGVK {
		cl.t.Fatalf("%s holds no SandboxTemplate", file)
	}
	tmpl.SetNamespace(Namespace)
	tmpl.SetName(Template)
	if err := cl.c.Create(context.Background(), tmpl); err != nil {
		cl.t.Fatal(err)
	}
}

// API is sandbox/kube's API through controller-runtime's client: the fake
// API server's status subresource and resourceVersion conflicts behave as
// a real one's.
type API struct{ c ctrl.Client }

func (a API) Get(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, a.c.Get(ctx, ctrl.ObjectKey{Namespace: ns, Name: name}, u)
}

func (a API) Create(ctx context.Context, obj *unstructured.Unstructured) error {
	return a.c.Create(ctx, obj)
}

func (a API) MergePatch(ctx context.Context, gvk schema.GroupVersionKind, ns, name string, patch []byte) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return a.c.Patch(ctx, u, ctrl.RawPatch(types.MergePatchType, patch))
}

func (a API) Delete(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) error {
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

// moduleRoot is the directory of warren's go.mod, found upwards from the
// test's working directory (its package's directory): the source file's
// own path is not known under -trimpath, which CI builds tests with.
func moduleRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/warrenhq/warren\n") {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("kubetest: no go.mod of github.com/warrenhq/warren above the working directory")
		}
		dir = up
	}
}
