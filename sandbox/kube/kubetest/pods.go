package kubetest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
)

// pod is a Sandbox's runner process.
type pod struct {
	cmd  *exec.Cmd
	ip   string
	dead chan struct{}
}

func (p *pod) kill() {
	p.cmd.Process.Kill()
	<-p.dead
}

// sandboxes lists the Sandboxes of the namespace.
func (cl *Cluster) sandboxes(ctx context.Context) []unstructured.Unstructured {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(SandboxGVK.GroupVersion().WithKind("SandboxList"))
	if err := cl.c.List(ctx, l, ctrl.InNamespace(Namespace)); err != nil {
		return nil
	}
	return l.Items
}

// reconcile does one round of the controller's and the kubelet's work.
func (cl *Cluster) reconcile(ctx context.Context) {
	cl.rec.Lock()
	defer cl.rec.Unlock()
	cl.reconcileClaims(ctx)
	seen := map[string]bool{}
	for _, sb := range cl.sandboxes(ctx) {
		name := sb.GetName()
		seen[name] = true
		mode, _, _ := unstructured.NestedString(sb.Object, "spec", "operatingMode")
		cl.mu.Lock()
		p := cl.pods[name]
		cl.mu.Unlock()
		switch {
		case mode == modeSuspended && p != nil:
			cl.stopPod(name, p)
			cl.setStatus(ctx, name, false, "SandboxSuspended", "", true)
		case mode == modeSuspended:
			cl.setStatus(ctx, name, false, "SandboxSuspended", "", true)
		case p == nil:
			cl.setStatus(ctx, name, false, "DependenciesNotReady", "", false)
			cl.mu.Lock()
			held := cl.hold[name]
			cl.mu.Unlock()
			if held {
				continue
			}
			if ip, err := cl.startPod(ctx, &sb); err != nil {
				cl.t.Logf("pod of %s: %v", name, err)
			} else {
				cl.setStatus(ctx, name, true, "DependenciesReady", ip, false)
			}
		}
	}
	// Sandboxes deleted: their pods stop and their volumes go.
	cl.mu.Lock()
	var gone []string
	for name := range cl.pods {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	cl.mu.Unlock()
	for _, name := range gone {
		cl.mu.Lock()
		p := cl.pods[name]
		cl.mu.Unlock()
		cl.stopPod(name, p)
	}
	cl.mu.Lock()
	for name, dir := range cl.volumes {
		if !seen[name] {
			os.RemoveAll(dir)
			delete(cl.volumes, name)
		}
	}
	cl.mu.Unlock()
}

func (cl *Cluster) stopPod(name string, p *pod) {
	p.kill()
	cl.mu.Lock()
	if cl.pods[name] == p {
		delete(cl.pods, name)
	}
	cl.mu.Unlock()
}

// startPod runs the Sandbox's runner container as the kubelet would.
func (cl *Cluster) startPod(ctx context.Context, sb *unstructured.Unstructured) (string, error) {
	name := sb.GetName()
	spec, _, _ := unstructured.NestedMap(sb.Object, "spec", "podTemplate", "spec")
	containers, _, _ := unstructured.NestedSlice(spec, "containers")
	if len(containers) != 1 {
		return "", fmt.Errorf("want one container, got %d", len(containers))
	}
	ctr := containers[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(ctr, "command")
	more, _, _ := unstructured.NestedStringSlice(ctr, "args")
	args = append(args, more...)
	if len(args) == 0 || filepath.Base(args[0]) != "warren-runner" {
		return "", fmt.Errorf("the container does not run warren-runner: %q", args)
	}
	secret, tlsPath := "", ""
	vols, _, _ := unstructured.NestedSlice(spec, "volumes")
	for _, v := range vols {
		if m := v.(map[string]any); m["name"] == TLSVolume {
			secret, _, _ = unstructured.NestedString(m, "secret", "secretName")
		}
	}
	// The volume claim's mounts: subPath → where the container sees it.
	claimMounts := map[string]string{}
	mounts, _, _ := unstructured.NestedSlice(ctr, "volumeMounts")
	for _, v := range mounts {
		m := v.(map[string]any)
		at, _ := m["mountPath"].(string)
		switch m["name"] {
		case TLSVolume:
			tlsPath = at
		case "workspace":
			sub, _ := m["subPath"].(string)
			claimMounts[sub] = at
		}
	}
	cl.mu.Lock()
	if s, ok := cl.secretOf[name]; ok {
		secret = s
	}
	cl.mu.Unlock()
	if secret == "" || tlsPath == "" {
		return "", fmt.Errorf("no %s volume with a Secret mounted", TLSVolume)
	}
	var sec corev1.Secret
	if err := cl.c.Get(ctx, ctrl.ObjectKey{Namespace: Namespace, Name: secret}, &sec); err != nil {
		return "", err // the kubelet waits for the Secret
	}
	cl.mu.Lock()
	cl.nextIP++
	ip := "127.0.0." + strconv.Itoa(cl.nextIP)
	vol, ok := cl.volumes[name]
	if !ok {
		vol = filepath.Join(cl.root, name+"-volume")
		cl.volumes[name] = vol
	}
	cl.starts[name]++
	podDir := filepath.Join(cl.root, name+"-pod-"+strconv.Itoa(cl.starts[name]))
	cl.mu.Unlock()
	for _, d := range []string{vol, podDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", err
		}
	}
	for k, b := range sec.Data {
		if err := os.WriteFile(filepath.Join(podDir, k), b, 0o400); err != nil {
			return "", err
		}
	}
	for i := range args {
		if i > 0 && args[i-1] == "--listen" {
			args[i] = net.JoinHostPort(ip, strconv.Itoa(cl.port))
		}
		// The pods share this host's network: each one's loopback is
		// its own address (127.0.0.N, loopback too), at EgressPort.
		if i > 0 && args[i-1] == "--egress-listen" {
			args[i] = net.JoinHostPort(ip, strconv.Itoa(cl.egressPort))
		}
	}
	var cmd *exec.Cmd
	if cl.plain {
		cmd = plainPod(args, vol, podDir, tlsPath, cl.runner)
	} else {
		var err error
		if cmd, err = cl.bwrapPod(ctr, args, vol, podDir, tlsPath, claimMounts); err != nil {
			return "", err
		}
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	p := &pod{cmd: cmd, ip: ip, dead: make(chan struct{})}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on ") {
		cmd.Process.Kill()
		cmd.Wait()
		return "", fmt.Errorf("the runner did not listen: %q %v", line, err)
	}
	cl.mu.Lock()
	cl.pods[name] = p
	cl.mu.Unlock()
	// A pod whose process ends is not ready until it is started again.
	go func() {
		cmd.Wait()
		close(p.dead)
		cl.rec.Lock()
		defer cl.rec.Unlock()
		cl.mu.Lock()
		mine := cl.pods[name] == p
		if mine {
			delete(cl.pods, name)
		}
		cl.mu.Unlock()
		if mine {
			cl.setStatus(context.Background(), name, false, "DependenciesNotReady", "", false)
		}
	}()
	return ip, nil
}

// plainPod runs the runner as a plain process working in the volume
// directory, its certificate files at the pod's directory.
func plainPod(args []string, vol, podDir, tlsPath, runner string) *exec.Cmd {
	for i, a := range args {
		if strings.HasPrefix(a, tlsPath+"/") {
			args[i] = filepath.Join(podDir, strings.TrimPrefix(a, tlsPath+"/"))
		}
	}
	cmd := exec.Command(runner, args[1:]...)
	cmd.Dir = vol
	return cmd
}

// bwrapPod runs the runner in a mount namespace made as the kubelet would
// make the container's: the volume claim's subdirectories at their mount
// paths, the Secret at its, the host's programs read-only.
func (cl *Cluster) bwrapPod(ctr map[string]any, args []string, vol, podDir, tlsPath string, claimMounts map[string]string) (*exec.Cmd, error) {
	// A pid namespace of its own: when the pod's process is killed,
	// whatever its commands left running goes with it, as with a pod.
	bw := []string{"--die-with-parent", "--unshare-pid", "--unshare-ipc", "--tmpfs", "/"}
	bw = append(bw, systemDirs()...)
	bw = append(bw, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--ro-bind", podDir, tlsPath, "--ro-bind", cl.runner, "/opt/warren-runner")
	for sub, at := range claimMounts {
		dir := filepath.Join(vol, sub)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		bw = append(bw, "--bind", dir, at)
	}
	if wd, _ := ctr["workingDir"].(string); wd != "" {
		bw = append(bw, "--chdir", wd)
	}
	bw = append(append(bw, "--", "/opt/warren-runner"), args[1:]...)
	cmd := exec.Command("bwrap", bw...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/warren"}
	return cmd, nil
}

// systemDirs are bwrap's arguments giving the pod this host's programs,
// read-only: the warren image has a shell and its tools too.
func systemDirs() []string {
	out := []string{"--ro-bind", "/usr", "/usr"}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64", "/lib32"} {
		if target, err := os.Readlink(d); err == nil {
			out = append(out, "--symlink", target, d)
		} else if _, err := os.Stat(d); err == nil {
			out = append(out, "--ro-bind", d, d)
		}
	}
	return out
}

// setStatus writes the Sandbox's status as the controller does.
func (cl *Cluster) setStatus(ctx context.Context, name string, ready bool, reason, ip string, suspended bool) {
	for range 20 {
		sb := &unstructured.Unstructured{}
		sb.SetGroupVersionKind(SandboxGVK)
		if err := cl.c.Get(ctx, ctrl.ObjectKey{Namespace: Namespace, Name: name}, sb); err != nil {
			return
		}
		cond := func(typ string, on bool, reason string) map[string]any {
			s := "False"
			if on {
				s = "True"
			}
			return map[string]any{"type": typ, "status": s, "reason": reason, "message": "",
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
		}
		status := map[string]any{"conditions": []any{cond("Ready", ready, reason), cond("Suspended", suspended, "PodTerminated")}}
		if ip != "" {
			status["podIPs"] = []any{ip}
		}
		sb.Object["status"] = status
		err := cl.c.Status().Update(ctx, sb)
		if err == nil || !apierrors.IsConflict(err) {
			return
		}
	}
}
