package kube

import (
	"context"
	"encoding/base64"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// API is the little of the Kubernetes API that sessions' sandboxes need,
// on unstructured objects. Production uses client-go's dynamic client
// (Dynamic, Connect), which links none of Kubernetes' typed APIs: linking
// controller-runtime's client instead registers every built-in API type
// at start, 16 MB of RSS in every warren, Kubernetes or not (measured:
// see docs/kubernetes.md). The tests drive the same code through
// controller-runtime's fake client.
type API interface {
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
	Create(ctx context.Context, obj *unstructured.Unstructured) error
	// MergePatch applies a JSON merge patch (RFC 7396) to the object.
	MergePatch(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, patch []byte) error
	// Delete deletes the object, its dependents in the background.
	Delete(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) error
}

// SecretGVK is the core v1 Secret.
var SecretGVK = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}

// resources are the plural names of the kinds this package uses.
var resources = map[schema.GroupVersionKind]string{
	SandboxGVK: "sandboxes", TemplateGVK: "sandboxtemplates", ClaimGVK: "sandboxclaims", SecretGVK: "secrets",
}

type dynamicAPI struct{ d dynamic.Interface }

// Dynamic is the API through client-go's dynamic client.
func Dynamic(d dynamic.Interface) API { return dynamicAPI{d} }

// Connect reaches the cluster warren runs in (kubeconfig "": the pod's
// service account) or the one a kubeconfig file names.
func Connect(kubeconfig string) (API, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("not in a Kubernetes pod (%v): name a kubeconfig file", err)
		}
	} else if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.UserAgent = "warren"
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return Dynamic(d), nil
}

func (a dynamicAPI) res(gvk schema.GroupVersionKind, ns string) (dynamic.ResourceInterface, error) {
	plural, ok := resources[gvk]
	if !ok {
		return nil, fmt.Errorf("sandbox/kube does not use %v", gvk)
	}
	return a.d.Resource(gvk.GroupVersion().WithResource(plural)).Namespace(ns), nil
}

func (a dynamicAPI) Get(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	r, err := a.res(gvk, ns)
	if err != nil {
		return nil, err
	}
	return r.Get(ctx, name, metav1.GetOptions{})
}

func (a dynamicAPI) Create(ctx context.Context, obj *unstructured.Unstructured) error {
	r, err := a.res(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return err
	}
	_, err = r.Create(ctx, obj, metav1.CreateOptions{})
	return err
}

func (a dynamicAPI) MergePatch(ctx context.Context, gvk schema.GroupVersionKind, ns, name string, patch []byte) error {
	r, err := a.res(gvk, ns)
	if err != nil {
		return err
	}
	_, err = r.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func (a dynamicAPI) Delete(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) error {
	r, err := a.res(gvk, ns)
	if err != nil {
		return err
	}
	bg := metav1.DeletePropagationBackground
	return r.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
}

// newSecret is a Secret as an unstructured object (data base64-encoded,
// as the API carries it).
func newSecret(ns, name, typ string, labels map[string]string, data map[string][]byte) *unstructured.Unstructured {
	enc := map[string]any{}
	for k, v := range data {
		enc[k] = base64.StdEncoding.EncodeToString(v)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"data": enc}}
	if typ != "" {
		u.Object["type"] = typ
	}
	u.SetGroupVersionKind(SecretGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

// secretData is a Secret's data, decoded; a key that does not decode is
// left out.
func secretData(u *unstructured.Unstructured) map[string][]byte {
	out := map[string][]byte{}
	m, _, _ := unstructured.NestedMap(u.Object, "data")
	for k, v := range m {
		s, _ := v.(string)
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			out[k] = b
		}
	}
	return out
}
