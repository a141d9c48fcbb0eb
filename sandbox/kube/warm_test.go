package kube

import (
	"context"
	"strconv"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
)

// With a warm pool, a session claims a sandbox the pool started before,
// reaches its runner by the pool's certificate, and gives it back on
// delete.
func TestWarmPoolClaim(t *testing.T) {
	cl := newCluster(t)
	s := newSandboxes(t, cl, Config{WarmPool: "warren-warm"})
	ctx := testCtx(t)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	sb, err := s.Create(ctx, "s-warm")
	if err != nil {
		t.Fatal(err)
	}
	if sb.Name == "warren-s-warm" || sb.claim != "warren-s-warm" {
		t.Errorf("the session got sandbox %q by claim %q, want the pool's sandbox by the session's claim", sb.Name, sb.claim)
	}
	conn, err := sb.Runner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ping(t, ctx, conn)
	again, err := s.Open(ctx, "s-warm")
	if err != nil || again.Name != sb.Name {
		t.Fatalf("reopening the claimed session: %v %v", again, err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	claim := s.claimObject(sb.claim)
	if err := cl.c.Get(ctx, ctrl.ObjectKey{Namespace: testNS, Name: sb.claim}, claim); !apierrors.IsNotFound(err) {
		t.Errorf("the claim after Delete: %v", err)
	}
}

// reconcileClaims plays the warm pool's controller: a claim gets a
// Sandbox of the pool's template (mounting the pool's Secret), and its
// deletion deletes that Sandbox.
func (cl *cluster) reconcileClaims(ctx context.Context) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(ClaimGVK.GroupVersion().WithKind("SandboxClaimList"))
	if err := cl.c.List(ctx, l, ctrl.InNamespace(testNS)); err != nil {
		return
	}
	present := map[string]bool{}
	for _, c := range l.Items {
		present[c.GetName()] = true
		if got, _, _ := unstructured.NestedString(c.Object, "status", "sandbox", "name"); got != "" {
			continue
		}
		pool, _, _ := unstructured.NestedString(c.Object, "spec", "warmPoolRef", "name")
		tmpl := &unstructured.Unstructured{}
		tmpl.SetGroupVersionKind(TemplateGVK)
		if err := cl.c.Get(ctx, ctrl.ObjectKey{Namespace: testNS, Name: "warren-session"}, tmpl); err != nil {
			continue
		}
		podT, _, _ := unstructured.NestedMap(tmpl.Object, "spec", "podTemplate")
		_ = withSessionPod(podT, PoolSecret(pool), "")
		cl.mu.Lock()
		cl.nextWarm++
		name := pool + "-" + strconv.Itoa(cl.nextWarm)
		cl.mu.Unlock()
		sb := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"podTemplate": podT, "operatingMode": ModeRunning}}}
		sb.SetGroupVersionKind(SandboxGVK)
		sb.SetNamespace(testNS)
		sb.SetName(name)
		if err := cl.c.Create(ctx, sb); err != nil {
			continue
		}
		_ = unstructured.SetNestedField(c.Object, name, "status", "sandbox", "name")
		if err := cl.c.Status().Update(ctx, &c); err != nil {
			cl.t.Logf("claim %s: %v", c.GetName(), err)
		}
		cl.mu.Lock()
		cl.claims[c.GetName()] = name
		cl.mu.Unlock()
	}
	// A deleted claim takes its sandbox with it (owner references).
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for claim, name := range cl.claims {
		if !present[claim] {
			sb := &unstructured.Unstructured{}
			sb.SetGroupVersionKind(SandboxGVK)
			sb.SetNamespace(testNS)
			sb.SetName(name)
			_ = cl.c.Delete(ctx, sb)
			delete(cl.claims, claim)
		}
	}
}
