package kube

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/warrenhq/warren/sandbox/kube/kubetest"
	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
	"github.com/warrenhq/warren/sandbox/runner/runnertest"
	"github.com/warrenhq/warren/sessions/errs"
)

// runnerBin is the runner runnertest.Main built for the pods' runners.
var runnerBin string

func TestMain(m *testing.M) { os.Exit(runnertest.Main(m, &runnerBin)) }

// newCluster is the fake cluster of sandbox/kube/kubetest, whose pods'
// runners are plain processes working in their Sandbox's volume: a pod is
// told from the next by its runner's pid, and its volume by where it works.
func newCluster(t *testing.T) *kubetest.Cluster { return kubetest.New(t, runnerBin, kubetest.Plain) }

func newSandboxes(t *testing.T, cl *kubetest.Cluster, cfg Config) *Sandboxes {
	t.Helper()
	cfg.Namespace, cfg.Port, cfg.PollEvery = kubetest.Namespace, cl.Port(), kubetest.PollEvery
	if cfg.Template == "" {
		cfg.Template = kubetest.Template
	}
	s, err := New(cl.API(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ping asks the runner for its pid: the process on the host that the
// harness started (a pod), so the test can tell one pod from the next.
// up creates the session id's Sandbox through s, connects to its runner
// and pings it: the Sandbox, the connection and the runner's pid.
func up(t *testing.T, ctx context.Context, s *Sandboxes, id string) (*Sandbox, *client.Conn, int) {
	t.Helper()
	sb, err := s.Create(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := sb.Runner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return sb, conn, ping(t, ctx, conn)
}

func ping(t *testing.T, ctx context.Context, c *client.Conn) int {
	t.Helper()
	var res proto.PingResult
	if err := c.Call(ctx, proto.OpPing, proto.PingArgs{}, nil, &res); err != nil {
		t.Fatalf("ping: %v", err)
	}
	return res.PID
}

// cwd is where a runner process works: the Sandbox's volume.
func cwd(t *testing.T, pid int) string {
	t.Helper()
	dir, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func alive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

func getSandbox(t *testing.T, cl *kubetest.Cluster, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(SandboxGVK)
	return u, cl.Client().Get(context.Background(), ctrl.ObjectKey{Namespace: kubetest.Namespace, Name: name}, u)
}

// A session's life in a fake cluster with real runners: made from the
// deployment's SandboxTemplate, reached over mutual TLS, suspended (its
// pod stops), resumed (a new pod over the same volume), deleted (the
// Sandbox, its certificate and its pod gone).
func TestSessionSandboxLifecycle(t *testing.T) {
	cl := newCluster(t)
	s := newSandboxes(t, cl, Config{})
	ctx := testCtx(t)

	sb, err := s.Create(ctx, "s-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if sb.Name != "warren-s-0123456789abcdef" {
		t.Errorf("the sandbox is named %q", sb.Name)
	}
	obj, err := getSandbox(t, cl, sb.Name)
	if err != nil {
		t.Fatal(err)
	}
	if obj.GetLabels()[LabelSession] != "s-0123456789abcdef" {
		t.Errorf("the Sandbox's labels %v do not name the session", obj.GetLabels())
	}
	if v, ok, _ := unstructured.NestedBool(obj.Object, "spec", "podTemplate", "spec", "automountServiceAccountToken"); !ok || v {
		t.Error("the session's pod would get a service-account token")
	}
	if rc, _, _ := unstructured.NestedString(obj.Object, "spec", "podTemplate", "spec", "runtimeClassName"); rc != "gvisor" {
		t.Errorf("the session's pod runs in %q, not gVisor", rc)
	}
	if claims, _, _ := unstructured.NestedSlice(obj.Object, "spec", "volumeClaimTemplates"); len(claims) != 1 {
		t.Errorf("the Sandbox has %d volume claims, want the template's workspace", len(claims))
	}

	conn, err := sb.Runner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := ping(t, ctx, conn)
	vol := cl.Volume(sb.Name)
	if vol == "" || cwd(t, first) != vol {
		t.Fatalf("the runner works in %q, not the Sandbox's volume %q", cwd(t, first), vol)
	}
	if again, err := sb.Runner(ctx); err != nil || again != conn {
		t.Errorf("a second Runner made a second connection (%v)", err)
	}

	// Suspend: the pod stops; the session cannot be reached until resumed.
	if err := sb.Suspend(ctx); err != nil {
		t.Fatal(err)
	}
	if alive(first) {
		t.Error("the pod's runner still runs after Suspend returned")
	}
	if mode, _, _ := unstructured.NestedString(mustGet(t, cl, sb.Name).Object, "spec", "operatingMode"); mode != ModeSuspended {
		t.Errorf("operatingMode is %q after Suspend", mode)
	}
	if _, err := sb.Runner(ctx); errs.CodeOf(err) != errs.Conflict {
		t.Errorf("Runner of a suspended sandbox: %v, want a conflict saying to resume", err)
	}

	// Resume: a new pod over the same volume.
	if err := sb.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err = sb.Runner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second := ping(t, ctx, conn)
	if second == first || cwd(t, second) != vol {
		t.Errorf("after resume: pid %d (was %d) in %q, want a new pod in %q", second, first, cwd(t, second), vol)
	}

	// Delete: the Sandbox and its certificate go, and the pod with them.
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := getSandbox(t, cl, sb.Name); !apierrors.IsNotFound(err) {
		t.Errorf("the Sandbox after Delete: %v", err)
	}
	var sec corev1.Secret
	if err := cl.Client().Get(ctx, ctrl.ObjectKey{Namespace: kubetest.Namespace, Name: secretName(sb.Name)}, &sec); !apierrors.IsNotFound(err) {
		t.Errorf("the session's certificate Secret after Delete: %v", err)
	}
	if _, err := sb.Runner(ctx); errs.CodeOf(err) != errs.NotFound {
		t.Errorf("Runner of a deleted sandbox: %v, want not_found", err)
	}
	for alive(second) {
		time.Sleep(20 * time.Millisecond) // the harness stops the pod on its next round
	}
	if err := sb.Delete(ctx); err != nil {
		t.Errorf("deleting again: %v", err)
	}
}

func mustGet(t *testing.T, cl *kubetest.Cluster, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := getSandbox(t, cl, name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A pod that dies (killed, evicted, its node gone) comes back with its
// volume; the session's connection ends with the pod, and the next Runner
// reaches the new pod at its new address.
func TestPodThatDiesComesBack(t *testing.T) {
	cl := newCluster(t)
	s := newSandboxes(t, cl, Config{})
	ctx := testCtx(t)
	sb, conn, first := up(t, ctx, s, "s-dies")
	ip := cl.PodIP(sb.Name)
	vol := cl.Volume(sb.Name)
	cl.KillPod(sb.Name)
	<-conn.Done()
	var res proto.PingResult
	if err := conn.Call(ctx, proto.OpPing, proto.PingArgs{}, nil, &res); !errors.Is(err, client.ErrGone) {
		t.Fatalf("a call on the dead pod's connection: %v", err)
	}
	var err error
	conn, err = sb.Runner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second := ping(t, ctx, conn)
	if second == first || cwd(t, second) != vol {
		t.Errorf("after the pod died: pid %d (was %d) in %q, want a new pod over %q", second, first, cwd(t, second), vol)
	}
	if np := cl.PodIP(sb.Name); np == "" || np == ip {
		t.Errorf("the new pod is not at a new address")
	}
}

// A server restarted (or another replica) finds warren's authority in its
// Secret and reaches the runner the first one certified.
func TestAnotherServerReachesTheSession(t *testing.T) {
	cl := newCluster(t)
	ctx := testCtx(t)
	_, _, pid := up(t, ctx, newSandboxes(t, cl, Config{}), "s-shared")

	other, err := newSandboxes(t, cl, Config{}).Open(ctx, "s-shared")
	if err != nil {
		t.Fatal(err)
	}
	c2, err := other.Runner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ping(t, ctx, c2); got != pid {
		t.Errorf("the other server reached pid %d, not the session's %d", got, pid)
	}
}

// Ids that cannot name a Kubernetes object are refused, never changed
// into a name another session could have.
func TestSandboxNames(t *testing.T) {
	for _, id := range []string{"S-UPPER", "s_under", "", "s-" + string(make([]byte, 60)), "s-a/b"} {
		if _, err := Name(id); errs.CodeOf(err) != errs.Invalid {
			t.Errorf("Name(%q): %v, want invalid", id, err)
		}
	}
	if n, err := Name("s-0123456789abcdef"); err != nil || n != "warren-s-0123456789abcdef" {
		t.Errorf("Name of a session id: %q %v", n, err)
	}
	if _, err := New(nil, Config{Namespace: "x"}); errs.CodeOf(err) != errs.Invalid {
		t.Errorf("New without a template: %v", err)
	}
}

// Suspending a session whose pod has not come up yet (someone waits for
// it) suspends it: the waiter is told the session is suspended, rather
// than the suspension waiting behind the waiter.
func TestSuspendWhileWaitingForThePod(t *testing.T) {
	cl := newCluster(t)
	s := newSandboxes(t, cl, Config{})
	ctx := testCtx(t)
	name, _ := Name("s-wait")
	cl.Hold(name, true)
	sb, err := s.Create(ctx, "s-wait")
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := sb.Runner(wctx)
		waited <- err
	}()
	for {
		st, err := s.state(ctx, name) // the waiter has seen a pod that is not ready
		if err == nil && st.why != "" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let the waiter take its lock and poll
	if err := sb.Suspend(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; errs.CodeOf(err) != errs.Conflict {
		t.Errorf("the waiter got %v, want a conflict saying the session is suspended", err)
	}
}

// The fake cluster of the tests plays the API this package uses: the same
// kinds, the same volume and Secret names.
func TestFakeClusterPlaysThisAPI(t *testing.T) {
	for _, p := range [][2]any{{kubetest.SandboxGVK, SandboxGVK}, {kubetest.TemplateGVK, TemplateGVK},
		{kubetest.ClaimGVK, ClaimGVK}, {kubetest.SecretGVK, SecretGVK}, {kubetest.TLSVolume, TLSVolume},
		{kubetest.PoolSecret("p"), PoolSecret("p")}, {kubetest.Template, "warren-session"}} {
		if p[0] != p[1] {
			t.Errorf("the fake cluster has %v where this package has %v", p[0], p[1])
		}
	}
}
