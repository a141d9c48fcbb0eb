package kube

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/warrenhq/warren/sandbox/runner/client"
)

// AnnotationSeeded marks a Sandbox whose volume holds the session's first
// content (the directory or clone the server made): set once the runner
// has written all of it, so that a server that restarts, or another
// replica, never writes it again over what the session has done since.
const AnnotationSeeded = "warren.dev/seeded"

// Seeded reports whether the sandbox's volume has its first content.
func (b *Sandbox) Seeded(ctx context.Context) (bool, error) {
	u, err := b.s.c.Get(ctx, SandboxGVK, b.s.cfg.Namespace, b.Name)
	if err != nil {
		return false, apiErr(err, "read the Sandbox "+b.Name)
	}
	v, _, _ := unstructured.NestedString(u.Object, "metadata", "annotations", AnnotationSeeded)
	return v == "true", nil
}

// MarkSeeded records that the sandbox's volume has its first content.
func (b *Sandbox) MarkSeeded(ctx context.Context) error {
	patch := []byte(`{"metadata":{"annotations":{"` + AnnotationSeeded + `":"true"}}}`)
	if err := b.s.c.MergePatch(ctx, SandboxGVK, b.s.cfg.Namespace, b.Name, patch); err != nil {
		return apiErr(err, "mark the Sandbox "+b.Name+" as holding the session's files")
	}
	return nil
}

// Live is the connection to the runner if one is up, else nil; it never
// dials.
func (b *Sandbox) Live() *client.Conn { return b.live() }

// Disconnect closes the connection to the runner, leaving the sandbox as
// it is (a server that stops, or lets another replica take the session).
func (b *Sandbox) Disconnect() { b.drop() }

// Stop asks for the sandbox to be suspended (its pod stopped, its volume
// kept) without waiting for the pod to go: Suspend waits.
func (b *Sandbox) Stop(ctx context.Context) error {
	b.drop()
	return b.setMode(ctx, ModeSuspended)
}
