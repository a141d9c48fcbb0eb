package kube

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of a kustomization.yaml these manifests use.
type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Resources  []string
	Patches    []struct{ Path string }
}

func readKustomization(t *testing.T, file string) kustomization {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return k
}

// The overlay for replicas (deploy/replicas): its patches, applied to the
// base's objects as kustomize applies them (strategic merge), give a
// Deployment of two replicas rolled one at a time, each named after its
// pod, ready only when /readyz says so, with the data directory on a
// ReadWriteMany claim; a PodDisruptionBudget keeps one serving through a
// drain. Every object decodes into its type with no unknown field.
func TestDeployReplicasOverlay(t *testing.T) {
	k := readKustomization(t, "deploy/replicas/kustomization.yaml")
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" || !slices.Contains(k.Resources, "../") {
		t.Fatalf("deploy/replicas/kustomization.yaml is not an overlay of deploy/: %+v", k)
	}
	files, _ := filepath.Glob("deploy/replicas/*.yaml")
	for _, f := range files {
		base := filepath.Base(f)
		if base != "kustomization.yaml" && !slices.Contains(k.Resources, base) && !slices.ContainsFunc(k.Patches, func(p struct{ Path string }) bool { return p.Path == base }) {
			t.Errorf("%s is in no resource or patch of the overlay: it would never be applied", base)
		}
	}
	// The base's objects, by kind.
	objs := map[string]*unstructured.Unstructured{}
	for _, r := range readKustomization(t, "deploy/kustomization.yaml").Resources {
		for _, u := range decodeFile(t, filepath.Join("deploy", r)) {
			objs[u.GetKind()] = u
		}
	}
	types := map[string]any{"Deployment": appsv1.Deployment{}, "PersistentVolumeClaim": corev1.PersistentVolumeClaim{}}
	for _, p := range k.Patches {
		for _, patch := range decodeFile(t, filepath.Join("deploy/replicas", p.Path)) {
			orig := objs[patch.GetKind()]
			if orig == nil || orig.GetName() != patch.GetName() {
				t.Fatalf("%s patches %s %s, which the base does not have", p.Path, patch.GetKind(), patch.GetName())
			}
			ob, _ := json.Marshal(orig.Object)
			pb, _ := json.Marshal(patch.Object)
			merged, err := strategicpatch.StrategicMergePatch(ob, pb, types[patch.GetKind()])
			if err != nil {
				t.Fatalf("%s: %v", p.Path, err)
			}
			u := &unstructured.Unstructured{}
			if err := json.Unmarshal(merged, &u.Object); err != nil {
				t.Fatal(err)
			}
			objs[patch.GetKind()] = u
		}
	}
	for _, r := range k.Resources {
		if r == "../" {
			continue
		}
		for _, u := range decodeFile(t, filepath.Join("deploy/replicas", r)) {
			objs[u.GetKind()] = u
		}
	}

	var dep appsv1.Deployment
	strict(t, objs["Deployment"].Object, &dep)
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas < 2 {
		t.Errorf("the overlay's Deployment runs %v replicas, want 2", dep.Spec.Replicas)
	}
	if s := dep.Spec.Strategy; s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil ||
		s.RollingUpdate.MaxUnavailable == nil || s.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Errorf("the overlay's Deployment is not rolled one new pod at a time with none unavailable: %+v", s)
	}
	var ctr *corev1.Container
	for i := range dep.Spec.Template.Spec.Containers {
		if dep.Spec.Template.Spec.Containers[i].Name == "warren" {
			ctr = &dep.Spec.Template.Spec.Containers[i]
		}
	}
	if ctr == nil {
		t.Fatal("no warren container")
	}
	if p := ctr.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "http" || p.TCPSocket != nil {
		t.Errorf("the readiness probe is not one GET /readyz on the http port: %+v", p)
	}
	if p := ctr.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("the liveness probe is not GET /healthz: %+v", p)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range ctr.Env {
		env[e.Name] = e
	}
	if e := env["WARREN_REPLICA_ID"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("WARREN_REPLICA_ID is not the pod's name: %+v", e)
	}
	if e := env["WARREN_DATABASE"]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "warren-database" {
		t.Errorf("the replicas' database is not PostgreSQL's URL from the Secret warren-database: %+v", e)
	}
	if env["WARREN_DATA_DIR"].Value == "" {
		t.Fatal("no WARREN_DATA_DIR")
	}
	var claim string
	for _, m := range ctr.VolumeMounts {
		if m.MountPath == env["WARREN_DATA_DIR"].Value {
			for _, v := range dep.Spec.Template.Spec.Volumes {
				if v.Name == m.Name && v.PersistentVolumeClaim != nil {
					claim = v.PersistentVolumeClaim.ClaimName
				}
			}
		}
	}
	var pvc corev1.PersistentVolumeClaim
	strict(t, objs["PersistentVolumeClaim"].Object, &pvc)
	if claim != pvc.Name || !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}) {
		t.Errorf("the data directory is on claim %q; the claim %q is %v, want ReadWriteMany", claim, pvc.Name, pvc.Spec.AccessModes)
	}
	if g := dep.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g < 35 {
		t.Errorf("termination grace %v: less than a shell_exec's 30s yield", g)
	}
	if objs["PodDisruptionBudget"] == nil {
		t.Fatal("the overlay has no PodDisruptionBudget")
	}
	var pdb policyv1.PodDisruptionBudget
	strict(t, objs["PodDisruptionBudget"].Object, &pdb)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 || pdb.Spec.MinAvailable.IntValue() >= int(*dep.Spec.Replicas) ||
		pdb.Spec.Selector == nil || !matches(pdb.Spec.Selector.MatchLabels, dep.Spec.Template.Labels) {
		t.Errorf("the PodDisruptionBudget does not keep 1 of the Deployment's pods: %+v", pdb.Spec)
	}
}
