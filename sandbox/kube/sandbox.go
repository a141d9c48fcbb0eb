package kube

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
	"github.com/warrenhq/warren/sessions/errs"
)

// Operating modes of a Sandbox (spec.operatingMode).
const (
	ModeRunning   = "Running"
	ModeSuspended = "Suspended"
)

// Sandbox is one session's sandbox: its name in the cluster and, once
// dialed, the connection to its runner.
type Sandbox struct {
	s       *Sandboxes
	Session string // warren's session id
	Name    string // the Sandbox resource
	claim   string // the SandboxClaim that holds it, from a warm pool
	tls     string // the name its runner's certificate is issued for

	dialing sync.Mutex // one dial at a time; held while waiting for the pod
	mu      sync.Mutex // guards conn, never held while waiting
	conn    *client.Conn
}

// Create makes the sandbox of session id from the configured template
// (or claims one from the warm pool) and its runner's certificate. It
// returns at once; Runner waits for the pod. A sandbox that exists
// already (made by this server before a restart, or by another replica)
// is taken as it is.
func (s *Sandboxes) Create(ctx context.Context, id string) (*Sandbox, error) {
	name, err := Name(id)
	if err != nil {
		return nil, err
	}
	if s.cfg.WarmPool != "" {
		return s.claim(ctx, id, name)
	}
	if err := s.runnerSecret(ctx, name, id); err != nil {
		return nil, err
	}
	sb, err := s.fromTemplate(ctx, name, id)
	if err != nil {
		return nil, err
	}
	if err := s.c.Create(ctx, sb); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, apiErr(err, "create the session's Sandbox "+name)
	}
	return &Sandbox{s: s, Session: id, Name: name, tls: s.tlsName(name)}, nil
}

// fromTemplate is a session's Sandbox: the template's pod and volume
// claims, the session's certificate in the volume TLSVolume, and no
// service-account token whatever the template says (nothing in a pod
// may speak to the API server).
func (s *Sandboxes) fromTemplate(ctx context.Context, name, id string) (*unstructured.Unstructured, error) {
	tmpl, err := s.c.Get(ctx, TemplateGVK, s.cfg.Namespace, s.cfg.Template)
	if err != nil {
		return nil, apiErr(err, "read the SandboxTemplate "+s.cfg.Template)
	}
	pod, ok, _ := unstructured.NestedMap(tmpl.Object, "spec", "podTemplate")
	if !ok {
		return nil, errs.New(errs.Invalid, "the SandboxTemplate "+s.cfg.Template+" has no spec.podTemplate")
	}
	if err := withSessionPod(pod, secretName(name), id, s.cfg.EgressProxy); err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "the SandboxTemplate "+s.cfg.Template+": "+err.Error())
	}
	spec := map[string]any{"podTemplate": pod, "operatingMode": ModeRunning}
	if claims, ok, _ := unstructured.NestedSlice(tmpl.Object, "spec", "volumeClaimTemplates"); ok {
		spec["volumeClaimTemplates"] = claims
	}
	sb := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	sb.SetGroupVersionKind(SandboxGVK)
	sb.SetNamespace(s.cfg.Namespace)
	sb.SetName(name)
	sb.SetLabels(map[string]string{LabelManagedBy: managedBy, LabelSession: id})
	return sb, nil
}

// withSessionPod puts the session's Secret in the pod template's volume
// TLSVolume, labels the pod, turns the service-account token off and,
// with egress (the proxy's address), has the runner forward the pod's
// egress to warren's proxy.
func withSessionPod(pod map[string]any, secret, id, egress string) error {
	spec, ok := pod["spec"].(map[string]any)
	if !ok {
		return fmt.Errorf("spec.podTemplate has no spec")
	}
	if egress != "" {
		if err := withEgress(spec, egress); err != nil {
			return err
		}
	}
	spec["automountServiceAccountToken"] = false
	vols, _, _ := unstructured.NestedSlice(spec, "volumes")
	kept := vols[:0]
	for _, v := range vols {
		if m, ok := v.(map[string]any); ok && m["name"] == TLSVolume {
			continue
		}
		kept = append(kept, v)
	}
	spec["volumes"] = append(kept, map[string]any{"name": TLSVolume,
		"secret": map[string]any{"secretName": secret, "defaultMode": int64(0o440)}})
	labels, _, _ := unstructured.NestedStringMap(pod, "metadata", "labels")
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelSession] = id
	return unstructured.SetNestedStringMap(pod, labels, "metadata", "labels")
}

// Open is the sandbox of a session made before (by this server before a
// restart, or by another replica): nothing is read until it is used.
func (s *Sandboxes) Open(ctx context.Context, id string) (*Sandbox, error) {
	name, err := Name(id)
	if err != nil {
		return nil, err
	}
	if s.cfg.WarmPool != "" {
		return s.claimed(ctx, id, name)
	}
	return &Sandbox{s: s, Session: id, Name: name, tls: s.tlsName(name)}, nil
}

// state is what warren reads of a Sandbox.
type state struct {
	mode      string
	ready     bool
	suspended bool   // the pod is gone after a suspension
	why       string // the Ready condition's reason and message, cut
	ip        string // the pod's first address, checked
}

func (s *Sandboxes) state(ctx context.Context, name string) (state, error) {
	u, err := s.c.Get(ctx, SandboxGVK, s.cfg.Namespace, name)
	if err != nil {
		return state{}, apiErr(err, "read the Sandbox "+name)
	}
	var st state
	st.mode, _, _ = unstructured.NestedString(u.Object, "spec", "operatingMode")
	if st.mode == "" {
		st.mode = ModeRunning
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		status, _ := m["status"].(string)
		switch typ {
		case "Ready":
			st.ready = status == "True"
			reason, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			st.why = proto.Cut(reason+": "+msg, 300)
		case "Suspended":
			st.suspended = status == "True"
		}
	}
	ips, _, _ := unstructured.NestedStringSlice(u.Object, "status", "podIPs")
	for _, ip := range ips {
		if net.ParseIP(ip) != nil {
			st.ip = ip
			break
		}
	}
	return st, nil
}

// Runner is the connection to the session's runner: the live one, or a
// new one once the pod is ready (after a create, a resume, or a pod that
// died and came back). It waits up to ctx's deadline, five minutes
// without one; concurrent callers share one connection.
func (b *Sandbox) Runner(ctx context.Context) (*client.Conn, error) {
	if c := b.live(); c != nil {
		return c, nil
	}
	b.dialing.Lock()
	defer b.dialing.Unlock()
	if c := b.live(); c != nil {
		return c, nil // another caller dialed while this one waited
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
	}
	for {
		conn, err := b.dial(ctx)
		if conn != nil {
			b.mu.Lock()
			b.conn = conn
			b.mu.Unlock()
			return conn, nil
		}
		if c := errs.CodeOf(err); c == errs.NotFound || c == errs.Conflict || c == errs.Invalid {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, errs.Wrap(errs.Unavailable, err, "the session's sandbox "+b.Name+" did not become reachable in time: "+err.Error())
		case <-time.After(b.s.cfg.PollEvery):
		}
	}
}

// live is the connection if it has not ended.
func (b *Sandbox) live() *client.Conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn == nil {
		return nil
	}
	select {
	case <-b.conn.Done():
		b.conn = nil
		return nil
	default:
		return b.conn
	}
}

// dial makes one attempt: read where the pod is, connect, await the hello.
func (b *Sandbox) dial(ctx context.Context) (*client.Conn, error) {
	st, err := b.s.state(ctx, b.Name)
	switch {
	case err != nil:
		if errs.CodeOf(err) == errs.NotFound {
			return nil, errs.Wrap(errs.NotFound, err, "the session's sandbox "+b.Name+" is gone (deleted in the cluster)")
		}
		return nil, err
	case st.mode == ModeSuspended:
		return nil, errs.New(errs.Conflict, "the session's sandbox "+b.Name+" is suspended: resume the session first")
	case !st.ready || st.ip == "":
		return nil, errs.New(errs.Unavailable, "the session's sandbox "+b.Name+" is not ready ("+st.why+")")
	}
	cfg, err := b.s.clientTLS(ctx, b.tls)
	if err != nil {
		return nil, err
	}
	conn, err := client.DialTLS(ctx, net.JoinHostPort(st.ip, strconv.Itoa(b.s.cfg.Port)), cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Hello(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// drop closes the live connection, if any.
func (b *Sandbox) drop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn != nil {
		b.conn.Close()
		b.conn = nil
	}
}

func (b *Sandbox) setMode(ctx context.Context, mode string) error {
	patch := []byte(`{"spec":{"operatingMode":"` + mode + `"}}`)
	if err := b.s.c.MergePatch(ctx, SandboxGVK, b.s.cfg.Namespace, b.Name, patch); err != nil {
		return apiErr(err, "set the Sandbox "+b.Name+" to "+mode)
	}
	return nil
}

// Suspend stops the session's pod, keeping its volume, and returns once
// the controller reports the pod gone (or ctx ends).
func (b *Sandbox) Suspend(ctx context.Context) error {
	b.drop()
	if err := b.setMode(ctx, ModeSuspended); err != nil {
		return err
	}
	for {
		st, err := b.s.state(ctx, b.Name)
		if err != nil {
			return err
		}
		if st.suspended && !st.ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return errs.Wrap(errs.Unavailable, ctx.Err(), "the sandbox "+b.Name+" is set to Suspended but its pod has not stopped yet ("+st.why+")")
		case <-time.After(b.s.cfg.PollEvery):
		}
	}
}

// Resume asks for the session's pod again, over the same volume; the next
// Runner waits for it.
func (b *Sandbox) Resume(ctx context.Context) error {
	return b.setMode(ctx, ModeRunning)
}

// Delete removes the session's sandbox (its pod and, by the controller's
// owner references, its volume claims) and its certificate. Deleting what
// is already gone is not an error.
func (b *Sandbox) Delete(ctx context.Context) error {
	b.drop()
	ns := b.s.cfg.Namespace
	gvk, name := SandboxGVK, b.Name
	if b.claim != "" {
		gvk, name = ClaimGVK, b.claim
	} else if err := b.s.c.Delete(ctx, SecretGVK, ns, secretName(b.Name)); err != nil && !apierrors.IsNotFound(err) {
		return apiErr(err, "delete the session's runner certificate "+secretName(b.Name))
	}
	if err := b.s.c.Delete(ctx, gvk, ns, name); err != nil && !apierrors.IsNotFound(err) {
		return apiErr(err, "delete the session's sandbox "+name)
	}
	return nil
}
