package kube

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warrenhq/warren/sandbox/kube/kubetest"
)

// Attack: a pod at the address the API server gives for session A that
// holds session B's certificate (another of warren's own runners), or a
// certificate of another authority, is never talked to.
func TestImpostorRunnerIsNotBelieved(t *testing.T) {
	cl := newCluster(t)
	s := newSandboxes(t, cl, Config{})
	ctx := testCtx(t)
	b, err := s.Create(ctx, "s-bbbb")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Runner(ctx); err != nil {
		t.Fatal(err)
	}
	// Another authority's certificate for A's very name.
	foreign := newSandboxes(t, cl, Config{CASecret: "someone-else"})
	if err := foreign.certSecret(ctx, "foreign-tls", s.tlsName("warren-s-cccc"), nil); err != nil {
		t.Fatal(err)
	}
	for name, secret := range map[string]string{"s-aaaa": secretName(b.Name), "s-cccc": "foreign-tls"} {
		sbName, _ := Name(name)
		cl.MountSecret(sbName, secret)
		a, err := s.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for cl.PodPID(a.Name) == 0 {
			time.Sleep(20 * time.Millisecond) // the impostor is up and listening
		}
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := a.Runner(short)
		cancel()
		if err == nil {
			t.Errorf("%s: the server talked to a runner holding %s (pid %d)", name, secret, ping(t, ctx, conn))
		}
	}
}

// Attack: a template that asks for the service-account token, or brings
// a warren-tls volume of its own (another session's certificate), does not
// get them: every session's pod has no token and its own Secret.
func TestTemplateCannotGiveThePodATokenOrAnotherCertificate(t *testing.T) {
	cl := newCluster(t)
	ctx := testCtx(t)
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(TemplateGVK)
	if err := cl.Client().Get(ctx, ctrl.ObjectKey{Namespace: kubetest.Namespace, Name: kubetest.Template}, tmpl); err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(tmpl.Object, "spec", "podTemplate", "spec")
	spec["automountServiceAccountToken"] = true
	vols, _, _ := unstructured.NestedSlice(spec, "volumes")
	spec["volumes"] = append(vols, map[string]any{"name": TLSVolume, "secret": map[string]any{"secretName": "warren-s-other-tls"}})
	if err := unstructured.SetNestedMap(tmpl.Object, spec, "spec", "podTemplate", "spec"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Client().Update(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	sb, err := newSandboxes(t, cl, Config{}).Create(ctx, "s-tmpl")
	if err != nil {
		t.Fatal(err)
	}
	obj := mustGet(t, cl, sb.Name)
	if v, _, _ := unstructured.NestedBool(obj.Object, "spec", "podTemplate", "spec", "automountServiceAccountToken"); v {
		t.Error("the session's pod gets a service-account token")
	}
	vols, _, _ = unstructured.NestedSlice(obj.Object, "spec", "podTemplate", "spec", "volumes")
	var secrets []string
	for _, v := range vols {
		if m := v.(map[string]any); m["name"] == TLSVolume {
			name, _, _ := unstructured.NestedString(m, "secret", "secretName")
			secrets = append(secrets, name)
		}
	}
	if len(secrets) != 1 || secrets[0] != secretName(sb.Name) {
		t.Errorf("the pod's %s volumes hold %v, want only %s", TLSVolume, secrets, secretName(sb.Name))
	}
	if _, err := sb.Runner(ctx); err != nil {
		t.Fatal(err)
	}
}
