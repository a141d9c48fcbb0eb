package kube

import (
	"context"
	"crypto/x509"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/warrenhq/warren/sandbox/kube/kubetest"
)

// racingAPI holds every read of the authority's Secret until n servers
// have read it, so that they all find it missing and all try to make it:
// replicas that start at once. It counts the Secrets made under that name.
type racingAPI struct {
	API
	name    string
	n       int
	mu      sync.Mutex
	waiting int
	release chan struct{}
	created atomic.Int64
}

func (r *racingAPI) Get(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	u, err := r.API.Get(ctx, gvk, ns, name)
	if gvk == SecretGVK && name == r.name {
		r.mu.Lock()
		r.waiting++
		if r.waiting == r.n {
			close(r.release)
		}
		r.mu.Unlock()
		select {
		case <-r.release:
		case <-ctx.Done():
		}
	}
	return u, err
}

func (r *racingAPI) Create(ctx context.Context, obj *unstructured.Unstructured) error {
	err := r.API.Create(ctx, obj)
	if err == nil && obj.GetKind() == "Secret" && obj.GetName() == r.name {
		r.created.Add(1)
	}
	return err
}

// Replicas that start at once against a namespace without warren's
// certificate authority make it once between them and all use that one:
// a runner one of them certified is reached by the other, and each one's
// egress proxy certificate is believed by the runners (it chains to the
// shared authority for the proxy's name).
func TestReplicasStartingAtOnceShareOneAuthority(t *testing.T) {
	cl := newCluster(t)
	ctx := testCtx(t)
	const replicas = 3
	api := &racingAPI{API: cl.API(), name: "warren-runner-ca", n: replicas, release: make(chan struct{})}
	var servers [replicas]*Sandboxes
	var proxies [replicas][]byte
	var wg sync.WaitGroup
	errc := make(chan error, replicas)
	for i := range servers {
		s, err := New(api, Config{Namespace: kubetest.Namespace, Template: kubetest.Template, Port: cl.Port(), PollEvery: kubetest.PollEvery})
		if err != nil {
			t.Fatal(err)
		}
		servers[i] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg, err := s.EgressTLS(ctx) // what serve does at start
			if err != nil {
				errc <- err
				return
			}
			cert, err := cfg.GetCertificate(nil)
			if err != nil {
				errc <- err
				return
			}
			proxies[i] = cert.Certificate[0]
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("a replica's start: %v", err)
	}
	if n := api.created.Load(); n != 1 {
		t.Fatalf("the authority's Secret was made %d times, want once", n)
	}
	for i, s := range servers {
		ca, err := s.authority(ctx)
		if err != nil {
			t.Fatal(err)
		}
		first, _ := servers[0].authority(ctx)
		if !ca.Cert.Equal(first.Cert) {
			t.Fatalf("replica %d uses another authority than replica 0", i)
		}
		pool := x509.NewCertPool()
		pool.AddCert(first.Cert)
		pc, err := x509.ParseCertificate(proxies[i])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pc.Verify(x509.VerifyOptions{Roots: pool, DNSName: EgressProxyName}); err != nil {
			t.Fatalf("replica %d's egress proxy certificate is not of the shared authority: %v", i, err)
		}
	}
	_, _, pid := up(t, ctx, servers[1], "s-raced")
	other, err := servers[2].Open(ctx, "s-raced")
	if err != nil {
		t.Fatal(err)
	}
	c2, err := other.Runner(ctx)
	if err != nil {
		t.Fatalf("a replica reaching the runner another certified: %v", err)
	}
	if got := ping(t, ctx, c2); got != pid {
		t.Fatalf("reached pid %d, not the session's %d", got, pid)
	}
}
