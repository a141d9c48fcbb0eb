package kube

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// decodeFile reads the YAML documents of a manifest file.
func decodeFile(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var m map[string]any
		if err := yaml.UnmarshalStrict([]byte(doc), &m); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// strict converts u into a typed object, failing on any field the type
// does not have (a typo in a manifest is silently ignored by the API
// server's older versions, and then the setting is just not there).
func strict(t *testing.T, u map[string]any, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u, into, true); err != nil {
		t.Fatalf("%T: %v", into, err)
	}
}

// The deployment's manifests: every file kustomize applies decodes into
// its Kubernetes type without unknown fields, and says what the issue
// asks: gVisor, no service-account token, non-root, the runner over TLS
// from the mounted Secret, the workspace and home on the volume claim, a
// NetworkPolicy that lets the pods talk only to warren, RBAC with only
// the verbs sandbox/kube uses, PostgreSQL's settings from a Secret.
func TestDeployManifests(t *testing.T) {
	var kust struct {
		APIVersion, Kind, Namespace string
		Resources                   []string
	}
	b, err := os.ReadFile("deploy/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &kust); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("deploy/*.yaml")
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(kust.Resources, base) {
			t.Errorf("%s is not in kustomization.yaml: it would never be applied", base)
		}
	}
	kinds := map[string]*unstructured.Unstructured{}
	for _, r := range kust.Resources {
		for _, u := range decodeFile(t, filepath.Join("deploy", r)) {
			kinds[u.GetKind()] = u
		}
	}
	for _, k := range []string{"RuntimeClass", "ServiceAccount", "Role", "RoleBinding", "SandboxTemplate", "NetworkPolicy", "Deployment", "PersistentVolumeClaim", "Service"} {
		if kinds[k] == nil {
			t.Fatalf("no %s in the manifests", k)
		}
	}

	// The session's pod.
	tmpl := kinds["SandboxTemplate"]
	if tmpl.GroupVersionKind() != TemplateGVK {
		t.Errorf("the template is %v, sandbox/kube reads %v", tmpl.GroupVersionKind(), TemplateGVK)
	}
	podMap, _, _ := unstructured.NestedMap(tmpl.Object, "spec", "podTemplate", "spec")
	var pod corev1.PodSpec
	strict(t, podMap, &pod)
	if pod.RuntimeClassName == nil || *pod.RuntimeClassName != kinds["RuntimeClass"].GetName() {
		t.Errorf("the pod's runtime class %v is not the manifests' RuntimeClass %s", pod.RuntimeClassName, kinds["RuntimeClass"].GetName())
	}
	if h, _, _ := unstructured.NestedString(kinds["RuntimeClass"].Object, "handler"); h != "runsc" {
		t.Errorf("the RuntimeClass's handler is %q, not gVisor's runsc", h)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the pod would get a service-account token")
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Error("the pod may run as root")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("the pod has %d containers, want the runner alone", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	cmd := strings.Join(append(ctr.Command, ctr.Args...), " ")
	if !strings.HasPrefix(cmd, "/usr/local/bin/warren-runner --listen :7070 ") {
		t.Errorf("the container runs %q, not the runner on :7070", cmd)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range ctr.VolumeMounts {
		mounts[m.MountPath] = m
	}
	tlsDir := ""
	for _, m := range ctr.VolumeMounts {
		if m.Name == TLSVolume {
			tlsDir = m.MountPath
		}
	}
	for _, flag := range []string{"--tls-cert " + tlsDir + "/tls.crt", "--tls-key " + tlsDir + "/tls.key", "--tls-client-ca " + tlsDir + "/ca.crt"} {
		if tlsDir == "" || !strings.Contains(cmd, flag) {
			t.Errorf("the runner is not given %q from the %s volume: %q", flag, TLSVolume, cmd)
		}
	}
	var claims []string
	vct, _, _ := unstructured.NestedSlice(tmpl.Object, "spec", "volumeClaimTemplates")
	for _, c := range vct {
		name, _, _ := unstructured.NestedString(c.(map[string]any), "metadata", "name")
		claims = append(claims, name)
	}
	home := ""
	for _, e := range ctr.Env {
		if e.Name == "HOME" {
			home = e.Value
		}
	}
	for _, p := range []string{ctr.WorkingDir, home} {
		if m, ok := mounts[p]; p == "" || !ok || !slices.Contains(claims, m.Name) {
			t.Errorf("%q (the workspace, and HOME) is not on the Sandbox's volume claim %v", p, claims)
		}
	}
	if sc := ctr.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("the runner may gain privileges")
	}
	podLabels, _, _ := unstructured.NestedStringMap(tmpl.Object, "spec", "podTemplate", "metadata", "labels")

	// The NetworkPolicy: the sessions' pods, both directions, only warren.
	var np networkingv1.NetworkPolicy
	strict(t, kinds["NetworkPolicy"].Object, &np)
	var dep appsv1.Deployment
	strict(t, kinds["Deployment"].Object, &dep)
	warrenLabels := dep.Spec.Template.Labels
	if !matches(np.Spec.PodSelector.MatchLabels, podLabels) || matches(np.Spec.PodSelector.MatchLabels, warrenLabels) {
		t.Errorf("the NetworkPolicy selects %v: not the sessions' pods %v alone", np.Spec.PodSelector.MatchLabels, podLabels)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Errorf("the NetworkPolicy does not restrict both directions: %v", np.Spec.PolicyTypes)
	}
	for _, r := range np.Spec.Egress {
		for _, to := range r.To {
			if to.IPBlock != nil || to.NamespaceSelector != nil || to.PodSelector == nil || !matches(to.PodSelector.MatchLabels, warrenLabels) {
				t.Errorf("the sessions' pods may reach something other than warren: %+v", to)
			}
		}
		if len(r.To) == 0 {
			t.Error("an egress rule without a destination lets the pods reach anything")
		}
	}
	for _, r := range np.Spec.Ingress {
		for _, from := range r.From {
			if from.IPBlock != nil || from.NamespaceSelector != nil || from.PodSelector == nil || !matches(from.PodSelector.MatchLabels, warrenLabels) {
				t.Errorf("something other than warren may reach the sessions' pods: %+v", from)
			}
		}
		if len(r.From) == 0 {
			t.Error("an ingress rule without a source lets anything reach the pods")
		}
	}

	// RBAC: exactly the verbs sandbox/kube uses.
	var role rbacv1.Role
	strict(t, kinds["Role"].Object, &role)
	want := map[string][]string{
		"agents.x-k8s.io/sandboxes":                   {"create", "delete", "get", "patch"},
		"extensions.agents.x-k8s.io/sandboxtemplates": {"get"},
		"extensions.agents.x-k8s.io/sandboxclaims":    {"create", "delete", "get"},
		"/secrets": {"create", "delete", "get"},
	}
	got := map[string][]string{}
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				got[g+"/"+res] = append(got[g+"/"+res], r.Verbs...)
			}
		}
	}
	for k, v := range got {
		slices.Sort(v)
		if !slices.Equal(v, want[k]) {
			t.Errorf("warren may %v %s; it uses %v", v, k, want[k])
		}
	}
	for k := range want {
		if got[k] == nil {
			t.Errorf("warren may not use %s", k)
		}
	}
	var rb rbacv1.RoleBinding
	strict(t, kinds["RoleBinding"].Object, &rb)
	if rb.RoleRef.Name != role.Name || len(rb.Subjects) != 1 || rb.Subjects[0].Name != dep.Spec.Template.Spec.ServiceAccountName {
		t.Errorf("the RoleBinding does not give the Role to warren's service account")
	}

	// warren: non-root, PostgreSQL from a Secret, the runner flags.
	wc := dep.Spec.Template.Spec.Containers[0]
	args := strings.Join(wc.Args, " ")
	for _, a := range []string{"--runner=kubernetes", "--kube-template=" + tmpl.GetName()} {
		if !strings.Contains(args, a) {
			t.Errorf("warren is not run with %s: %q", a, args)
		}
	}
	if strings.Contains(args, "WARREN_DATABASE") || strings.Contains(args, "postgres") {
		t.Errorf("the database's settings are in warren's arguments, which process listings show: %q", args)
	}
	fromSecret := false
	for _, e := range wc.Env {
		if e.Name == "WARREN_DATABASE" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			fromSecret = true
		}
	}
	if !fromSecret {
		t.Error("the PostgreSQL connection settings do not come from a Secret")
	}
	// The data directory (audit repositories, the clones sessions start
	// from) outlives warren's pod: a claim, mounted where WARREN_DATA_DIR
	// says; one replica, recreated, as a ReadWriteOnce volume needs.
	dataDir := ""
	for _, e := range wc.Env {
		if e.Name == "WARREN_DATA_DIR" {
			dataDir = e.Value
		}
	}
	var claim string
	for _, m := range wc.VolumeMounts {
		if m.MountPath == dataDir {
			for _, v := range dep.Spec.Template.Spec.Volumes {
				if v.Name == m.Name && v.PersistentVolumeClaim != nil {
					claim = v.PersistentVolumeClaim.ClaimName
				}
			}
		}
	}
	var pvc corev1.PersistentVolumeClaim
	strict(t, kinds["PersistentVolumeClaim"].Object, &pvc)
	if dataDir == "" || claim == "" || claim != pvc.Name {
		t.Errorf("warren's data directory %q is not on its PersistentVolumeClaim %q (mounted: %q)", dataDir, pvc.Name, claim)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 || dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Error("warren's Deployment is not one replica, recreated: a ReadWriteOnce data volume holds one pod")
	}
	if sc := dep.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("warren may run as root")
	}
	var svc corev1.Service
	strict(t, kinds["Service"].Object, &svc)
	if !matches(svc.Spec.Selector, warrenLabels) {
		t.Errorf("the Service selects %v, not warren's pods", svc.Spec.Selector)
	}
	checkEgressManifests(t, np, dep, svc, ctr)
}

// checkEgressManifests: warren serves its egress proxy to the pods on a
// port of its own (--kube-proxy-listen), which the Service publishes and
// warren tells the pods (--kube-proxy-addr, the Service's address: pods
// have no DNS); the NetworkPolicy lets the pods reach that port of warren
// alone, and lets only warren reach the runner's port.
func checkEgressManifests(t *testing.T, np networkingv1.NetworkPolicy, dep appsv1.Deployment, svc corev1.Service, runner corev1.Container) {
	t.Helper()
	warren := dep.Spec.Template.Spec.Containers[0]
	port := func(ports []corev1.ContainerPort, name string) int32 {
		for _, p := range ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
		return 0
	}
	proxyPort, runnerPort := port(warren.Ports, "egress"), port(runner.Ports, "runner")
	if proxyPort == 0 || runnerPort == 0 {
		t.Fatalf("warren's container has no port named egress (%d), or the runner's none named runner (%d)", proxyPort, runnerPort)
	}
	if want := fmt.Sprintf("--kube-proxy-listen=0.0.0.0:%d", proxyPort); !slices.Contains(warren.Args, want) {
		t.Errorf("warren does not serve its egress proxy on its egress port: want %s in %q", want, warren.Args)
	}
	var svcPort int32
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.String() == "egress" || p.TargetPort.IntValue() == int(proxyPort) {
			svcPort = p.Port
		}
	}
	host := strings.ToUpper(strings.ReplaceAll(svc.Name, "-", "_")) + "_SERVICE_HOST"
	if want := fmt.Sprintf("--kube-proxy-addr=$(%s):%d", host, svcPort); svcPort == 0 || !slices.Contains(warren.Args, want) {
		t.Errorf("the pods are not told the Service's egress port (%d): want %s in %q", svcPort, want, warren.Args)
	}
	only := func(what string, ports []networkingv1.NetworkPolicyPort, want int32) {
		if len(ports) != 1 || ports[0].Port == nil || ports[0].Port.IntValue() != int(want) || ports[0].EndPort != nil ||
			(ports[0].Protocol != nil && *ports[0].Protocol != corev1.ProtocolTCP) {
			t.Errorf("the NetworkPolicy's %s rule opens %+v, not TCP port %d alone", what, ports, want)
		}
	}
	if len(np.Spec.Egress) == 0 || len(np.Spec.Ingress) == 0 {
		t.Fatal("the NetworkPolicy has no egress or no ingress rule")
	}
	for _, r := range np.Spec.Egress {
		only("egress", r.Ports, proxyPort)
	}
	for _, r := range np.Spec.Ingress {
		only("ingress", r.Ports, runnerPort)
	}
}

// matches reports whether a selector's labels are all among labels.
func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// The Dockerfile: several stages, both programs, a user that is not root.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("deploy/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if strings.Count(s, "\nFROM ") < 2 {
		t.Error("the Dockerfile is not multi-stage")
	}
	for _, want := range []string{"./cmd/warren ", "./cmd/warren-runner", "USER 10001"} {
		if !strings.Contains(s, want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}
	if strings.Contains(s, "bubblewrap") {
		t.Error("the image installs bwrap, which a pod does not need")
	}
}
