package kube

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/warrenhq/warren/sandbox/runner/runnertest"
)

// The fake cluster: controller-runtime's fake API server, and a harness
// that does what the agent-sandbox controller and the kubelet would. A
// Sandbox in Running mode gets a "pod": a real warren-runner --listen
// process on an address of its own (127.0.0.N, the port of the template),
// started with the container's arguments from the template and the
// certificates of the Secret its TLSVolume names, working in a directory
// that stands in for the Sandbox's volume claim and outlives the pod.
// Suspended stops the process; a process that dies is started again on
// another address, as a pod is.

var runnerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "warren-kube-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	runnerBin, err = runnertest.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const testNS = "warren-test"

type pod struct {
	cmd  *exec.Cmd
	ip   string
	dead chan struct{}
}

type cluster struct {
	t    *testing.T
	c    ctrl.WithWatch
	port int
	root string

	// rec serializes the rounds of reconcile with what a pod's end
	// writes, so that a dead pod's status never lands after its
	// successor's.
	rec sync.Mutex

	mu       sync.Mutex
	pods     map[string]*pod   // by Sandbox name
	volumes  map[string]string // by Sandbox name: the "PVC"
	nextIP   int
	starts   map[string]int    // pods started, by Sandbox name
	claims   map[string]string // warm-pool claims: the Sandbox each got
	nextWarm int
	// secretOf, when set for a Sandbox, makes its pod mount another
	// Secret than the one its spec names (an impostor).
	secretOf map[string]string
	// hold keeps a Sandbox's pod from starting (a node that has no room).
	hold map[string]bool
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	scheme := runtime.NewScheme()
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
	cl := &cluster{t: t, c: c, port: port, root: t.TempDir(), pods: map[string]*pod{},
		volumes: map[string]string{}, nextIP: 1, starts: map[string]int{}, claims: map[string]string{}, secretOf: map[string]string{}, hold: map[string]bool{}}
	cl.applyTemplate("warren-session", "deploy/sandbox-template.yaml")
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
			p.cmd.Process.Kill()
			<-p.dead
		}
	})
	return cl
}

// applyTemplate creates the SandboxTemplate of the deployment's manifests
// (the one an operator applies) in the fake cluster under name.
func (cl *cluster) applyTemplate(name, file string) {
	objs := decodeFile(cl.t, file)
	if len(objs) != 1 || objs[0].GroupVersionKind() != TemplateGVK {
		cl.t.Fatalf("%s holds no single SandboxTemplate", file)
	}
	tmpl := objs[0]
	tmpl.SetNamespace(testNS)
	tmpl.SetName(name)
	if err := cl.c.Create(context.Background(), tmpl); err != nil {
		cl.t.Fatal(err)
	}
}

func (cl *cluster) sandboxes(ctx context.Context) []unstructured.Unstructured {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(SandboxGVK.GroupVersion().WithKind("SandboxList"))
	if err := cl.c.List(ctx, l, ctrl.InNamespace(testNS)); err != nil {
		return nil
	}
	return l.Items
}

// reconcile does one round of the controller's and the kubelet's work.
func (cl *cluster) reconcile(ctx context.Context) {
	cl.rec.Lock()
	defer cl.rec.Unlock()
	cl.reconcileClaims(ctx)
	seen := map[string]bool{}
	for _, sb := range cl.sandboxes(ctx) {
		name := sb.GetName()
		seen[name] = true
		mode, _, _ := unstructured.NestedString(sb.Object, "spec", "operatingMode")
		cl.mu.Lock()
		p := cl.pods[name]
		cl.mu.Unlock()
		switch {
		case mode == ModeSuspended && p != nil:
			cl.stopPod(name, p)
			cl.setStatus(ctx, name, false, "SandboxSuspended", "", true)
		case mode == ModeSuspended:
			cl.setStatus(ctx, name, false, "SandboxSuspended", "", true)
		case p == nil:
			cl.setStatus(ctx, name, false, "DependenciesNotReady", "", false)
			cl.mu.Lock()
			held := cl.hold[name]
			cl.mu.Unlock()
			if held {
				continue
			}
			if ip, err := cl.startPod(ctx, &sb); err != nil {
				cl.t.Logf("pod of %s: %v", name, err)
			} else {
				cl.setStatus(ctx, name, true, "DependenciesReady", ip, false)
			}
		}
	}
	// Sandboxes deleted: their pods stop and their claims' volumes go.
	cl.mu.Lock()
	var gone []string
	for name := range cl.pods {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	cl.mu.Unlock()
	for _, name := range gone {
		cl.mu.Lock()
		p := cl.pods[name]
		cl.mu.Unlock()
		cl.stopPod(name, p)
	}
	cl.mu.Lock()
	for name, dir := range cl.volumes {
		if !seen[name] {
			os.RemoveAll(dir)
			delete(cl.volumes, name)
		}
	}
	cl.mu.Unlock()
}

func (cl *cluster) stopPod(name string, p *pod) {
	p.cmd.Process.Kill()
	<-p.dead
	cl.mu.Lock()
	if cl.pods[name] == p {
		delete(cl.pods, name)
	}
	cl.mu.Unlock()
}

// startPod runs the Sandbox's runner container as the kubelet would.
func (cl *cluster) startPod(ctx context.Context, sb *unstructured.Unstructured) (string, error) {
	name := sb.GetName()
	spec, _, _ := unstructured.NestedMap(sb.Object, "spec", "podTemplate", "spec")
	containers, _, _ := unstructured.NestedSlice(spec, "containers")
	if len(containers) != 1 {
		return "", fmt.Errorf("want one container, got %d", len(containers))
	}
	ctr := containers[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(ctr, "command")
	more, _, _ := unstructured.NestedStringSlice(ctr, "args")
	args = append(args, more...)
	if len(args) == 0 || filepath.Base(args[0]) != "warren-runner" {
		return "", fmt.Errorf("the container does not run warren-runner: %q", args)
	}
	// The Secret mounted as TLSVolume, at the container's mount path.
	secret, mountPath := "", ""
	vols, _, _ := unstructured.NestedSlice(spec, "volumes")
	for _, v := range vols {
		m := v.(map[string]any)
		if m["name"] == TLSVolume {
			secret, _, _ = unstructured.NestedString(m, "secret", "secretName")
		}
	}
	mounts, _, _ := unstructured.NestedSlice(ctr, "volumeMounts")
	for _, v := range mounts {
		m := v.(map[string]any)
		if m["name"] == TLSVolume {
			mountPath, _ = m["mountPath"].(string)
		}
	}
	cl.mu.Lock()
	if s, ok := cl.secretOf[name]; ok {
		secret = s
	}
	cl.mu.Unlock()
	if secret == "" || mountPath == "" {
		return "", fmt.Errorf("no %s volume with a Secret mounted", TLSVolume)
	}
	var sec corev1.Secret
	if err := cl.c.Get(ctx, ctrl.ObjectKey{Namespace: testNS, Name: secret}, &sec); err != nil {
		return "", err // the kubelet waits for the Secret
	}
	cl.mu.Lock()
	cl.nextIP++
	ip := "127.0.0." + strconv.Itoa(cl.nextIP)
	vol, ok := cl.volumes[name]
	if !ok {
		vol = filepath.Join(cl.root, name+"-volume")
		cl.volumes[name] = vol
	}
	cl.starts[name]++
	podDir := filepath.Join(cl.root, name+"-pod-"+strconv.Itoa(cl.starts[name]))
	cl.mu.Unlock()
	for _, d := range []string{vol, podDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", err
		}
	}
	for k, b := range sec.Data {
		if err := os.WriteFile(filepath.Join(podDir, k), b, 0o400); err != nil {
			return "", err
		}
	}
	for i, a := range args {
		if strings.HasPrefix(a, mountPath+"/") {
			args[i] = filepath.Join(podDir, strings.TrimPrefix(a, mountPath+"/"))
		}
		if i > 0 && args[i-1] == "--listen" {
			args[i] = net.JoinHostPort(ip, strconv.Itoa(cl.port))
		}
	}
	cmd := exec.Command(runnerBin, args[1:]...)
	cmd.Dir = vol
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	p := &pod{cmd: cmd, ip: ip, dead: make(chan struct{})}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on ") {
		cmd.Process.Kill()
		cmd.Wait()
		return "", fmt.Errorf("the runner did not listen: %q %v", line, err)
	}
	cl.mu.Lock()
	cl.pods[name] = p
	cl.mu.Unlock()
	// A pod whose process ends is not ready until it is started again.
	go func() {
		cmd.Wait()
		close(p.dead)
		cl.rec.Lock()
		defer cl.rec.Unlock()
		cl.mu.Lock()
		mine := cl.pods[name] == p
		if mine {
			delete(cl.pods, name)
		}
		cl.mu.Unlock()
		if mine {
			cl.setStatus(context.Background(), name, false, "DependenciesNotReady", "", false)
		}
	}()
	return ip, nil
}

// setStatus writes the Sandbox's status as the controller does.
func (cl *cluster) setStatus(ctx context.Context, name string, ready bool, reason, ip string, suspended bool) {
	for range 20 {
		sb := &unstructured.Unstructured{}
		sb.SetGroupVersionKind(SandboxGVK)
		if err := cl.c.Get(ctx, ctrl.ObjectKey{Namespace: testNS, Name: name}, sb); err != nil {
			return
		}
		cond := func(typ string, on bool, reason string) map[string]any {
			s := "False"
			if on {
				s = "True"
			}
			return map[string]any{"type": typ, "status": s, "reason": reason, "message": "",
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
		}
		status := map[string]any{"conditions": []any{cond("Ready", ready, reason), cond("Suspended", suspended, "PodTerminated")}}
		if ip != "" {
			status["podIPs"] = []any{ip}
		}
		sb.Object["status"] = status
		err := cl.c.Status().Update(ctx, sb)
		if err == nil || !apierrors.IsConflict(err) {
			return
		}
	}
}

// pod is the current pod of a Sandbox (nil if none).
func (cl *cluster) pod(name string) *pod {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.pods[name]
}

func (cl *cluster) volume(name string) string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.volumes[name]
}
