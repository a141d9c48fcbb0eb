package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/warrenhq/warren/sandbox/runner/pki"
	"github.com/warrenhq/warren/sandbox/runner/proto"
	"github.com/warrenhq/warren/sessions/errs"
)

// How long the certificates live. The authority outlives any session;
// a runner's certificate is read once when its pod starts, so it must
// last as long as a session may (a session older than a year needs a new
// Secret: not done yet). The server's own certificate is issued for each
// connection and only needs to last its handshake.
const (
	caValidity     = 10 * 365 * 24 * time.Hour
	runnerValidity = 365 * 24 * time.Hour
	clientValidity = time.Hour
)

// authority is warren's certificate authority for runners in pods, kept in
// a Secret of the namespace so that a restarted server, or another
// replica, is still believed by the runners it certified.
type authority struct {
	mu sync.Mutex
	ca *pki.CA
}

// authority loads warren's certificate authority from its Secret, making it on first use. Two
// servers starting at once both try to create it; the loser reads the
// winner's.
func (s *Sandboxes) authority(ctx context.Context) (*pki.CA, error) {
	s.ca.mu.Lock()
	defer s.ca.mu.Unlock()
	if s.ca.ca != nil {
		return s.ca.ca, nil
	}
	ns, name := s.cfg.Namespace, s.cfg.CASecret
	sec, err := s.c.Get(ctx, SecretGVK, ns, name)
	if apierrors.IsNotFound(err) {
		// err is the outer one throughout: the loser of a race to make
		// the Secret reads the winner's, and that read's error is the
		// one checked below.
		ca, cerr := pki.NewCA("warren runners", caValidity)
		if cerr != nil {
			return nil, cerr
		}
		kb, cerr := x509.MarshalECPrivateKey(ca.Key)
		if cerr != nil {
			return nil, cerr
		}
		err = s.c.Create(ctx, newSecret(ns, name, "", map[string]string{LabelManagedBy: managedBy},
			map[string][]byte{"ca.crt": ca.PEM, "ca.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})}))
		if err == nil {
			s.ca.ca = ca
			return ca, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, apiErr(err, "create the runners' certificate authority (Secret "+name+")")
		}
		sec, err = s.c.Get(ctx, SecretGVK, ns, name)
	}
	if err != nil {
		return nil, apiErr(err, "read the runners' certificate authority (Secret "+name+")")
	}
	data := secretData(sec)
	ca, err := parseCA(data["ca.crt"], data["ca.key"])
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, fmt.Sprintf("the Secret %s does not hold a certificate authority warren can use (%v): delete it to make a new one, and with it every session's sandbox", name, err))
	}
	s.ca.ca = ca
	return ca, nil
}

// Reachable reads warren's certificate authority's Secret again from the
// API server: whether the cluster answers and lets warren read what it
// needs (a readiness check).
func (s *Sandboxes) Reachable(ctx context.Context) error {
	if _, err := s.c.Get(ctx, SecretGVK, s.cfg.Namespace, s.cfg.CASecret); err != nil {
		return apiErr(err, "read the runners' certificate authority (Secret "+s.cfg.CASecret+")")
	}
	return nil
}

func parseCA(certPEM, keyPEM []byte) (*pki.CA, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("ca.crt or ca.key is not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, err
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !cert.IsCA || !ok || !key.PublicKey.Equal(pub) {
		return nil, fmt.Errorf("ca.key does not belong to ca.crt, or ca.crt is no authority")
	}
	return &pki.CA{Cert: cert, Key: key, PEM: certPEM}, nil
}

// runnerSecret mints the runner's certificate for a session's sandbox and
// stores it with the authority of the server's certificates as the
// Secret the pod mounts. An existing Secret is kept (the sandbox was made
// before, by this server or another replica).
func (s *Sandboxes) runnerSecret(ctx context.Context, sandbox, session string) error {
	return s.certSecret(ctx, secretName(sandbox), s.tlsName(sandbox), map[string]string{LabelManagedBy: managedBy, LabelSession: session})
}

// certSecret stores a runner's certificate for tlsName as the Secret
// name, unless it exists.
func (s *Sandboxes) certSecret(ctx context.Context, name, tlsName string, labels map[string]string) error {
	ca, err := s.authority(ctx)
	if err != nil {
		return err
	}
	pair, err := ca.Issue(tlsName, true, runnerValidity)
	if err != nil {
		return err
	}
	sec := newSecret(s.cfg.Namespace, name, "kubernetes.io/tls", labels,
		map[string][]byte{"tls.crt": pair.CertPEM, "tls.key": pair.KeyPEM, "ca.crt": ca.PEM})
	if err := s.c.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
		return apiErr(err, "create the session's runner certificate (Secret "+name+")")
	}
	return nil
}

// clientTLS is the server's side of a connection to a runner: a fresh
// client certificate of the authority, and only a runner certified for
// tlsName.
func (s *Sandboxes) clientTLS(ctx context.Context, tlsName string) (*tls.Config, error) {
	ca, err := s.authority(ctx)
	if err != nil {
		return nil, err
	}
	own, err := ca.Issue("warren-server", false, clientValidity)
	if err != nil {
		return nil, err
	}
	return pki.ClientTLS(ca.PEM, own, tlsName)
}

// apiErr says what failed against the cluster with warren's codes: a
// refusal of the API server is the operator's to fix (RBAC, a missing
// CRD), a timeout or an unreachable server may pass.
func apiErr(err error, what string) error {
	msg := proto.Cut(what+": "+err.Error(), 1000)
	switch {
	case apierrors.IsNotFound(err):
		return errs.Wrap(errs.NotFound, err, msg)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return errs.Wrap(errs.Internal, err, msg+" (warren's service account lacks a permission: apply sandbox/kube/deploy's RBAC)")
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return errs.Wrap(errs.Invalid, err, msg)
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return errs.Wrap(errs.Conflict, err, msg)
	default:
		return errs.Wrap(errs.Unavailable, err, msg)
	}
}
