package kubetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
)

// ServeAPI serves the cluster's fake API over HTTP, as an API server
// serves the REST paths warren's dynamic client uses (get, create, merge
// patch and delete of Sandboxes, SandboxTemplates, SandboxClaims and
// Secrets), and returns a kubeconfig file naming it: a warren binary
// started with --kubeconfig reaches the fake cluster through its
// production client, with nothing in the binary made for tests.
func (cl *Cluster) ServeAPI(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(cl.serveAPI))
	t.Cleanup(srv.Close)
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: %s
users:
- name: warren
  user:
    token: fake
contexts:
- name: fake
  context:
    cluster: fake
    user: warren
current-context: fake
`, srv.URL)
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(file, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// kinds are the resources the fake API serves, by plural.
var kinds = map[string]schema.GroupVersionKind{
	"sandboxes": SandboxGVK, "sandboxtemplates": TemplateGVK, "sandboxclaims": ClaimGVK, "secrets": SecretGVK,
}

// route parses /api/v1/namespaces/NS/PLURAL[/NAME] and
// /apis/GROUP/VERSION/namespaces/NS/PLURAL[/NAME].
func route(path string) (gvk schema.GroupVersionKind, ns, name string, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var gv schema.GroupVersion
	switch {
	case len(parts) >= 5 && parts[0] == "api" && parts[2] == "namespaces":
		gv, parts = schema.GroupVersion{Version: parts[1]}, parts[3:]
	case len(parts) >= 6 && parts[0] == "apis" && parts[3] == "namespaces":
		gv, parts = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[4:]
	default:
		return gvk, "", "", false
	}
	gvk, ok = kinds[parts[1]]
	if !ok || gvk.GroupVersion() != gv || len(parts) > 3 {
		return gvk, "", "", false
	}
	if len(parts) == 3 {
		name = parts[2]
	}
	return gvk, parts[0], name, true
}

func (cl *Cluster) serveAPI(w http.ResponseWriter, r *http.Request) {
	gvk, ns, name, ok := route(r.URL.Path)
	if !ok {
		writeErr(w, apierrors.NewNotFound(schema.GroupResource{Resource: r.URL.Path}, ""))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		writeErr(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	ctx, status := r.Context(), http.StatusOK
	switch {
	case r.Method == http.MethodGet && name != "":
		err = cl.c.Get(ctx, ctrl.ObjectKey{Namespace: ns, Name: name}, u)
	case r.Method == http.MethodPost && name == "":
		if err = json.Unmarshal(body, &u.Object); err == nil {
			u.SetNamespace(ns)
			err = cl.c.Create(ctx, u)
			status = http.StatusCreated
		}
	case r.Method == http.MethodPatch && name != "":
		err = cl.c.Patch(ctx, u, ctrl.RawPatch(types.PatchType(r.Header.Get("Content-Type")), body))
	case r.Method == http.MethodDelete && name != "":
		if err = cl.c.Delete(ctx, u, ctrl.PropagationPolicy(metav1.DeletePropagationBackground)); err == nil {
			writeJSON(w, status, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
			return
		}
	default:
		err = apierrors.NewMethodNotSupported(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, r.Method)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, status, u.Object)
}

func writeErr(w http.ResponseWriter, err error) {
	st, ok := err.(apierrors.APIStatus)
	if !ok {
		st = apierrors.NewInternalError(err)
	}
	s := st.Status()
	s.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	writeJSON(w, int(s.Code), &s)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
