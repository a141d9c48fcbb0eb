package kube

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// The production API (client-go's dynamic client) names the resources
// right and carries a Secret's bytes and a merge patch as the API server
// takes them.
func TestDynamicAPI(t *testing.T) {
	scheme := runtime.NewScheme()
	d := dynamicfake.NewSimpleDynamicClient(scheme)
	api := Dynamic(d)
	ctx := context.Background()
	sb := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"operatingMode": ModeRunning}}}
	sb.SetGroupVersionKind(SandboxGVK)
	sb.SetNamespace("ns")
	sb.SetName("warren-s-1")
	if err := api.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Resource(schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}).Namespace("ns").Get(ctx, "warren-s-1", metav1.GetOptions{}); err != nil {
		t.Fatalf("the Sandbox is not under agents.x-k8s.io/v1beta1 sandboxes: %v", err)
	}
	if err := api.MergePatch(ctx, SandboxGVK, "ns", "warren-s-1", []byte(`{"spec":{"operatingMode":"Suspended"}}`)); err != nil {
		t.Fatal(err)
	}
	got, err := api.Get(ctx, SandboxGVK, "ns", "warren-s-1")
	if err != nil {
		t.Fatal(err)
	}
	if m, _, _ := unstructured.NestedString(got.Object, "spec", "operatingMode"); m != ModeSuspended {
		t.Errorf("operatingMode after the patch: %q", m)
	}
	key := []byte("-----BEGIN EC PRIVATE KEY-----\n\x00\xff")
	if err := api.Create(ctx, newSecret("ns", "s", "kubernetes.io/tls", nil, map[string][]byte{"tls.key": key})); err != nil {
		t.Fatal(err)
	}
	sec, err := api.Get(ctx, SecretGVK, "ns", "s")
	if err != nil {
		t.Fatal(err)
	}
	if string(secretData(sec)["tls.key"]) != string(key) {
		t.Errorf("the Secret's bytes came back as %q", secretData(sec)["tls.key"])
	}
	if err := api.Delete(ctx, SandboxGVK, "ns", "warren-s-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Get(ctx, SandboxGVK, "ns", "warren-s-1"); err == nil {
		t.Error("the Sandbox is still there after Delete")
	}
}

// Linking this package must not cost a server that does not use
// Kubernetes: no typed Kubernetes API and no controller-runtime (their
// package initialization registers every built-in type, ~16 MB of RSS in
// every warren, measured in docs/kubernetes.md).
func TestKubeLinksNoTypedAPI(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/warrenhq/warren/sandbox/kube").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "k8s.io/api/") || strings.HasPrefix(p, "sigs.k8s.io/controller-runtime") || p == "k8s.io/client-go/kubernetes/scheme" {
			t.Errorf("sandbox/kube links %s", p)
		}
	}
}
