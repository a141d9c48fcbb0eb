package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/urfave/cli/v2"
)

// The Deployment of sandbox/kube/deploy runs warren with serve http's own
// flags: each argument parses as one, to what the manifests mean, and the
// environment it sets (the data directory, the database from a Secret) is
// what those flags read.
func TestDeploymentArgsAreServeHTTPFlags(t *testing.T) {
	b, err := os.ReadFile("../../sandbox/kube/deploy/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		if m["kind"] == "Deployment" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &dep); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatal("no Deployment with warren's container")
	}
	ctr := dep.Spec.Template.Spec.Containers[0]
	if len(ctr.Args) < 2 || ctr.Args[0] != "serve" || ctr.Args[1] != "http" {
		t.Fatalf("the Deployment runs warren %q, not serve http", ctr.Args)
	}
	// The kubelet sets these; here they stand for what it would.
	for _, e := range ctr.Env {
		v := e.Value
		if e.ValueFrom != nil {
			v = "from-" + e.Name
		}
		t.Setenv(e.Name, v)
	}
	var got map[string]string
	cmd := serveCommand()
	for _, sub := range cmd.Subcommands {
		if sub.Name == "http" {
			sub.Action = func(c *cli.Context) error {
				got = map[string]string{}
				for _, f := range []string{"runner", "kube-namespace", "kube-template", "database", "data-dir", "addr", "kube-proxy-listen", "kube-proxy-addr"} {
					got[f] = c.String(f)
				}
				return nil
			}
		}
	}
	cmd.Before = nil
	app := &cli.App{Commands: []*cli.Command{cmd}, Writer: &strings.Builder{}, ErrWriter: &strings.Builder{}}
	if err := app.Run(append([]string{"warren"}, ctr.Args...)); err != nil || got == nil {
		t.Fatalf("serve http does not take the Deployment's arguments %q: %v", ctr.Args, err)
	}
	want := map[string]string{"runner": "kubernetes", "kube-namespace": "$(POD_NAMESPACE)", "kube-template": "warren-session",
		"database": "from-WARREN_DATABASE", "data-dir": "/var/lib/warren", "addr": "0.0.0.0:7373",
		"kube-proxy-listen": "0.0.0.0:7071", "kube-proxy-addr": "$(WARREN_SERVICE_HOST):7071"}
	for f, v := range want {
		if got[f] != v {
			t.Errorf("--%s is %q, want %q", f, got[f], v)
		}
	}
}

// warren links Kubernetes' client only as sandbox/kube does (the dynamic
// client on unstructured objects): no typed API, whose package
// initialization registers every built-in type at start in every warren,
// Kubernetes or not, and nothing made for tests (kubetest, the fake
// API server's controller-runtime).
func TestWarrenLinksNoTypedKubernetesAPI(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/warrenhq/warren/cmd/warren").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/warrenhq/warren/sessions/kuberunner") {
		t.Fatal("warren does not link sessions/kuberunner: --runner kubernetes is not wired")
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "k8s.io/api/") || strings.HasPrefix(p, "sigs.k8s.io/controller-runtime") ||
			p == "k8s.io/client-go/kubernetes/scheme" || strings.HasSuffix(p, "/kubetest") {
			t.Errorf("warren links %s", p)
		}
	}
}
