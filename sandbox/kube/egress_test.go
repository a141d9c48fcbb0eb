package kube

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/warrenhq/warren/sandbox/runner"
	"github.com/warrenhq/warren/sessions/errs"
)

// With an egress proxy, a session's Sandbox runs its runner with the
// forwarder on the pod's loopback at EgressPort, to the proxy's address,
// whatever egress the template named; the address must be one a pod
// without DNS can dial, and a warm pool's pods, which share one
// certificate, get none.
func TestSandboxRunnerForwardsEgress(t *testing.T) {
	cl := newCluster(t)
	cl.Hold("warren-egress1", true) // its pod does not matter here
	s := newSandboxes(t, cl, Config{EgressProxy: "10.96.0.7:7071"})
	if _, err := s.Create(testCtx(t), "egress1"); err != nil {
		t.Fatal(err)
	}
	sb := mustGet(t, cl, "warren-egress1")
	ctrs, _, _ := unstructured.NestedSlice(sb.Object, "spec", "podTemplate", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(ctrs[0].(map[string]any), "args")
	want := []string{"--egress-listen", "127.0.0.1:3128", "--egress-proxy", "10.96.0.7:7071"}
	if i := slices.Index(args, "--egress-listen"); i < 0 || !slices.Equal(args[i:], want) || strings.Count(strings.Join(args, " "), "--egress") != 2 {
		t.Fatalf("the session's runner args: %q", args)
	}
	if !slices.Contains(args, "--listen") {
		t.Fatalf("the template's args were lost: %q", args)
	}

	for _, cfg := range []Config{
		{EgressProxy: "warren.warren.svc:7071"},
		{EgressProxy: "10.96.0.7"},
		{EgressProxy: "10.96.0.7:0"},
		{EgressProxy: "10.96.0.7:7071", WarmPool: "warm"},
	} {
		cfg.Namespace, cfg.Template = "ns", "t"
		if _, err := New(cl.API(), cfg); errs.CodeOf(err) != errs.Invalid {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	if EgressPort != 3128 || runner.EgressProxyName != EgressProxyName {
		t.Fatalf("the runner and warren disagree: port %d, names %q %q", EgressPort, runner.EgressProxyName, EgressProxyName)
	}
}
