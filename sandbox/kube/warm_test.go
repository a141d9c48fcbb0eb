package kube

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warrenhq/warren/sandbox/kube/kubetest"
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
	if err := cl.Client().Get(ctx, ctrl.ObjectKey{Namespace: kubetest.Namespace, Name: sb.claim}, claim); !apierrors.IsNotFound(err) {
		t.Errorf("the claim after Delete: %v", err)
	}
}
