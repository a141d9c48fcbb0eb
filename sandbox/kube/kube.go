// Package kube runs warren sessions in Kubernetes: one agent-sandbox
// Sandbox (agents.x-k8s.io/v1beta1, kubernetes-sigs/agent-sandbox v0.5.6)
// per session, whose pod runs warren-runner --listen over mutual TLS. The
// server reaches the runner over one persistent connection
// (sandbox/runner/client), never through pods/exec.
//
// The adapter is thin on purpose: agent-sandbox is pre-1.0, so the
// Sandbox, SandboxTemplate and SandboxClaim resources are handled as
// unstructured objects, reading and writing only the fields named here
// (spec.podTemplate, spec.volumeClaimTemplates, spec.operatingMode,
// status.conditions, status.podIPs; a claim's spec.warmPoolRef and
// status.sandbox.name).
//
// Trust: the API server's view (status written by the agent-sandbox
// controller) says where a session's pod is; the runner there is believed
// only when it shows a certificate that warren's own authority issued for
// that session's name. Everything the runner says afterwards is untrusted,
// as for a runner in a local jail.
package kube

import (
	"fmt"
	"net/netip"
	"regexp"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/warrenhq/warren/sessions/errs"
)

// The resources this package uses, at the version it was written against.
var (
	SandboxGVK  = schema.GroupVersionKind{Group: "agents.x-k8s.io", Version: "v1beta1", Kind: "Sandbox"}
	TemplateGVK = schema.GroupVersionKind{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Kind: "SandboxTemplate"}
	ClaimGVK    = schema.GroupVersionKind{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Kind: "SandboxClaim"}
)

// Names of things the pod template and warren agree on.
const (
	// TLSVolume is the pod volume warren fills with the session's Secret
	// (tls.crt, tls.key: the runner's certificate; ca.crt: the authority
	// of the server's client certificates). The template mounts it.
	TLSVolume = "warren-tls"
	// LabelManagedBy and LabelSession mark what warren made, so that an
	// operator (and warren after a restart) can list it.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelSession   = "warren.dev/session"
	managedBy      = "warren"
	// DefaultPort is where the template's runner listens.
	DefaultPort = 7070
)

// Config says where and how sessions' sandboxes are made.
type Config struct {
	// Namespace holds the sandboxes, their Secrets and warren's authority.
	Namespace string
	// Template is the SandboxTemplate whose pod template and volume claim
	// templates every session's Sandbox copies.
	Template string
	// WarmPool, when set, names a SandboxWarmPool: sessions claim a warm
	// sandbox (a SandboxClaim) instead of creating one cold.
	WarmPool string
	// Port is where the runner listens in the pod (DefaultPort if 0).
	Port int
	// CASecret names the Secret holding warren's certificate authority
	// ("warren-runner-ca" if empty); made on first use.
	CASecret string
	// EgressProxy, when set, is the address (host:port) of warren's
	// egress proxy for pods (ServeEgress) as pods dial it: every session's
	// Sandbox made from the template gets a runner forwarding the pod's
	// 127.0.0.1:EgressPort there. Pods have no DNS, so an address, not a
	// name. Not with a warm pool, whose pods share one certificate.
	EgressProxy string
	// PollEvery is how often a wait reads the Sandbox again (500 ms if 0).
	PollEvery time.Duration
}

// Sandboxes makes and finds sessions' sandboxes through the Kubernetes
// API (a real cluster's, or a fake one in tests).
type Sandboxes struct {
	c   API
	cfg Config
	ca  *authority
}

// New returns the sandboxes of cfg reached through c. Nothing is read
// from the cluster until a session needs it.
func New(c API, cfg Config) (*Sandboxes, error) {
	if cfg.Namespace == "" || cfg.Template == "" && cfg.WarmPool == "" {
		return nil, errs.New(errs.Invalid, "kubernetes sessions need a namespace and a SandboxTemplate (or a warm pool) to make sandboxes from")
	}
	if cfg.EgressProxy != "" {
		if cfg.WarmPool != "" {
			return nil, errs.New(errs.Invalid, "network allowlists for sessions of a warm pool are not served: the pool's pods share one certificate, which names no session; leave the warm pool out to serve allowlists")
		}
		if ap, err := netip.ParseAddrPort(cfg.EgressProxy); err != nil || ap.Port() == 0 {
			return nil, errs.New(errs.Invalid, fmt.Sprintf("the egress proxy's address for pods %.80q is not IP:PORT (pods have no DNS: give the warren Service's cluster IP)", cfg.EgressProxy))
		}
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if cfg.Port < 1 || cfg.Port > 65535 {
		return nil, errs.New(errs.Invalid, fmt.Sprintf("the runner's port %d is not a TCP port (1-65535)", cfg.Port))
	}
	if cfg.CASecret == "" {
		cfg.CASecret = "warren-runner-ca"
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = 500 * time.Millisecond
	}
	return &Sandboxes{c: c, cfg: cfg, ca: &authority{}}, nil
}

// dns1123 is what a Sandbox's name (and its Service's, and its pod's host
// name) may be.
var dns1123 = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Name is the Sandbox of session id: "warren-" and the id. An id that
// cannot be part of a Kubernetes name is refused rather than changed, so
// that two sessions never share a sandbox.
func Name(id string) (string, error) {
	name := "warren-" + id
	// 63: a label (the pod's host name, the Service); the PVC adds
	// "<claim>-" in front, which is within the 253 of its name.
	if len(name) > 63 || !dns1123.MatchString(name) {
		return "", errs.New(errs.Invalid, fmt.Sprintf("session id %.80q cannot name a Kubernetes sandbox: use lower-case letters, digits and '-', at most 56 characters", id))
	}
	return name, nil
}

// tlsName is the name the runner's certificate is issued for and the
// server checks when it dials: the session's, not the pod's address,
// which changes each time the pod comes back.
func (s *Sandboxes) tlsName(sandbox string) string {
	return sandbox + "." + s.cfg.Namespace + ".warren-runner"
}

func secretName(sandbox string) string { return sandbox + "-tls" }
