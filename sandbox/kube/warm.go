package kube

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/warrenhq/warren/sessions/errs"
)

// Warm pools. A SandboxWarmPool keeps pods of a SandboxTemplate started
// before any session asks; a session claims one (a SandboxClaim) and the
// agent-sandbox controller hands it the adopted Sandbox's name. Those pods
// start before warren knows their session, so their runners share one
// certificate, in the Secret PoolSecret(pool) that the pool's template
// mounts as TLSVolume: warren then believes "a runner of this pool that
// its authority certified" at the address the API server gives for the
// claimed sandbox, not "this session's runner" as for a cold sandbox.
// The NetworkPolicy keeps pods from reaching each other, so one pool pod
// cannot stand in for another.

// PoolSecret is the Secret the warm pool's template mounts.
func PoolSecret(pool string) string { return pool + "-tls" }

func (s *Sandboxes) poolTLSName() string { return s.tlsName(s.cfg.WarmPool + ".pool") }

// Prepare makes what sandboxes need before the first session: warren's
// authority and, with a warm pool, the pool's runner certificate (the
// pool's pods wait for it to start). serve calls it at start.
func (s *Sandboxes) Prepare(ctx context.Context) error {
	if _, err := s.authority(ctx); err != nil {
		return err
	}
	if s.cfg.WarmPool == "" {
		return nil
	}
	return s.certSecret(ctx, PoolSecret(s.cfg.WarmPool), s.poolTLSName(), map[string]string{LabelManagedBy: managedBy})
}

func (s *Sandboxes) claimObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ClaimGVK)
	u.SetNamespace(s.cfg.Namespace)
	u.SetName(name)
	return u
}

// claim asks the warm pool for a sandbox for session id, under the claim
// name, and waits for the controller to name the sandbox it got.
func (s *Sandboxes) claim(ctx context.Context, id, name string) (*Sandbox, error) {
	if err := s.Prepare(ctx); err != nil {
		return nil, err
	}
	c := s.claimObject(name)
	c.SetLabels(map[string]string{LabelManagedBy: managedBy, LabelSession: id})
	_ = unstructured.SetNestedField(c.Object, s.cfg.WarmPool, "spec", "warmPoolRef", "name")
	if err := s.c.Create(ctx, c); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, apiErr(err, "claim a sandbox of the warm pool "+s.cfg.WarmPool)
	}
	return s.claimed(ctx, id, name)
}

// claimed is the sandbox the claim name holds, once the controller has
// named it.
func (s *Sandboxes) claimed(ctx context.Context, id, name string) (*Sandbox, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
	}
	for {
		c, err := s.c.Get(ctx, ClaimGVK, s.cfg.Namespace, name)
		if err != nil {
			return nil, apiErr(err, "read the SandboxClaim "+name)
		}
		got, _, _ := unstructured.NestedString(c.Object, "status", "sandbox", "name")
		if got != "" {
			if !dns1123.MatchString(got) || len(got) > 253 {
				return nil, errs.New(errs.Internal, "the SandboxClaim "+name+" names no valid sandbox")
			}
			return &Sandbox{s: s, Session: id, Name: got, claim: name, tls: s.poolTLSName()}, nil
		}
		select {
		case <-ctx.Done():
			return nil, errs.Wrap(errs.Unavailable, ctx.Err(), "the warm pool "+s.cfg.WarmPool+" gave the claim "+name+" no sandbox in time (is the pool empty, or its controller not running?)")
		case <-time.After(s.cfg.PollEvery):
		}
	}
}
