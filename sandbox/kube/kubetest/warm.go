package kubetest

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
)

// reconcileClaims plays a warm pool's controller: a SandboxClaim gets a
// Sandbox of the template whose pod mounts the pool's Secret
// (PoolSecret) as its warren-tls volume, named after the pool, not
// the session; deleting the claim deletes that Sandbox.
func (cl *Cluster) reconcileClaims(ctx context.Context) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(ClaimGVK.GroupVersion().WithKind("SandboxClaimList"))
	if err := cl.c.List(ctx, l, ctrl.InNamespace(Namespace)); err != nil {
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
		if err := cl.c.Get(ctx, ctrl.ObjectKey{Namespace: Namespace, Name: Template}, tmpl); err != nil {
			continue
		}
		podT, _, _ := unstructured.NestedMap(tmpl.Object, "spec", "podTemplate")
		vols, _, _ := unstructured.NestedSlice(podT, "spec", "volumes")
		vols = append(vols, map[string]any{"name": TLSVolume, "secret": map[string]any{"secretName": PoolSecret(pool)}})
		_ = unstructured.SetNestedSlice(podT, vols, "spec", "volumes")
		cl.mu.Lock()
		cl.nextWarm++
		name := pool + "-" + strconv.Itoa(cl.nextWarm)
		cl.mu.Unlock()
		sb := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"podTemplate": podT, "operatingMode": modeRunning}}}
		sb.SetGroupVersionKind(SandboxGVK)
		sb.SetNamespace(Namespace)
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
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for claim, name := range cl.claims {
		if !present[claim] {
			sb := &unstructured.Unstructured{}
			sb.SetGroupVersionKind(SandboxGVK)
			sb.SetNamespace(Namespace)
			sb.SetName(name)
			_ = cl.c.Delete(ctx, sb)
			delete(cl.claims, claim)
		}
	}
}

// Claimed is the Sandbox the warm pool gave the claim name ("" if none).
func (cl *Cluster) Claimed(claim string) string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.claims[claim]
}
