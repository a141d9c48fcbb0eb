package sandbox

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestJailHidesTheHost(t *testing.T) {
	sh, _ := newTestShell(t)
	marker, err := os.CreateTemp("", "warren-host-secret-")
	if err != nil {
		t.Fatal(err)
	}
	marker.Close()
	defer os.Remove(marker.Name())
	for _, cmd := range []string{
		"ls /home", "ls /root", "cat /etc/shadow", "ls /tmp/" + filepath.Base(marker.Name()),
		"ls /var/lib", "ls /work", "ls /srv",
	} {
		if res := mustRun(t, sh, cmd); res.ExitCode == 0 {
			t.Errorf("%q succeeded inside the jail: %q", cmd, res.Stdout)
		}
	}
	for _, cmd := range []string{"touch /usr/x", "touch /etc/x", "touch /x", "mkdir /newdir"} {
		res := mustRun(t, sh, cmd)
		if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "Read-only file system") {
			t.Errorf("%q: exit %d stderr %q; want a read-only file system", cmd, res.ExitCode, res.Stderr)
		}
	}
	expectOut(t, sh, "touch /workspace/ok /tmp/ok && echo writable", 0, "writable")
}

func TestJailHasNoPrivileges(t *testing.T) {
	sh, _ := newTestShell(t)
	expectOut(t, sh, "grep CapEff /proc/self/status | tr -d '\\t'", 0, "CapEff:0000000000000000")
	expectOut(t, sh, "id -u", 0, "1000")
	if res := mustRun(t, sh, "unshare -U true"); res.ExitCode == 0 {
		t.Error("a nested user namespace was created")
	}
	if os.Geteuid() == 0 {
		// The jail's processes belong to an unprivileged host uid.
		st, err := os.Stat("/proc/" + strconv.Itoa(sh.jail.shell()))
		if err != nil {
			t.Fatal(err)
		}
		if uid := st.Sys().(*syscall.Stat_t).Uid; uid == 0 {
			t.Errorf("the jailed shell runs as host uid 0")
		}
	}
}

func TestSecretsStayOffTheCommandLine(t *testing.T) {
	t.Setenv("WARREN_SERVER_SECRET", "server-only-value")
	sh, _ := newTestShell(t, func(p *Profile) { p.Env = map[string]string{"API_TOKEN": "tok-123"} })
	expectOut(t, sh, "echo $API_TOKEN", 0, "tok-123")
	res := mustRun(t, sh, "tr '\\0' ' ' </proc/1/cmdline; echo; tr '\\0' '\\n' </proc/1/environ")
	if strings.Contains(string(res.Stdout), "tok-123") || strings.Contains(string(res.Stdout), "server-only-value") {
		t.Fatalf("a secret is visible through /proc/1: %s", res.Stdout)
	}
}

func TestNoNetwork(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("reached")) }))
	defer srv.Close()
	sh, _ := newTestShell(t)
	res := mustRun(t, sh, "curl -sS --max-time 3 "+srv.URL)
	if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "reached") {
		t.Fatalf("the jail reached the host: exit %d %q", res.ExitCode, res.Stdout)
	}
	expectOut(t, sh, "ls /sys/class/net 2>/dev/null | tr '\\n' ' '; cat /proc/net/dev | grep -c :", 0, "1")
}

func TestNetworkWhenAllowed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("reached")) })}}
	srv.Start()
	defer srv.Close()
	sh, _ := newTestShell(t, func(p *Profile) { p.Network = true })
	expectOut(t, sh, "curl -sS --max-time 5 "+srv.URL, 0, "reached")
}

func TestShellsAreIsolatedFromEachOther(t *testing.T) {
	a, dirA := newTestShell(t)
	b, _ := newTestShell(t)
	mustRun(t, a, "echo a-secret > mine.txt; sleep 300 &")
	if res := mustRun(t, b, "cat /workspace/mine.txt; ls "+dirA); res.ExitCode == 0 {
		t.Fatalf("shell b read shell a's workspace: %q", res.Stdout)
	}
	// '[s]leep' does not match grep's own command line, which ps may or
	// may not list depending on which of the two starts first.
	if res := mustRun(t, b, "ps -eo args | grep -c '[s]leep 300'"); strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Fatalf("shell b sees shell a's processes: %q", res.Stdout)
	}
	if res := mustRun(t, a, "ps -eo args | grep -c '[s]leep 300'"); strings.TrimSpace(string(res.Stdout)) != "1" {
		t.Fatalf("shell a does not see its own job: %q", res.Stdout)
	}
}

func TestFileSizeLimit(t *testing.T) {
	sh, _ := newTestShell(t, func(p *Profile) { p.Limits.FileSizeBytes = 1 << 20 })
	if res := mustRun(t, sh, "ulimit -f unlimited"); res.ExitCode == 0 {
		t.Fatal("the jail raised its own file size limit")
	}
	res := mustRun(t, sh, "head -c 2097152 /dev/zero > big; stat -c %s big")
	if strings.TrimSpace(string(res.Stdout)) != "1048576" {
		t.Fatalf("file grew past the limit: %q (stderr %q)", res.Stdout, res.Stderr)
	}
}

// requireCgroups skips with the reason when this host gives the server no
// cgroups (it runs unprivileged); in CI, as root, they are there.
func requireCgroups(t *testing.T, sh *Shell) {
	t.Helper()
	mustRun(t, sh, "true")
	if err := sh.CgroupError(); err != nil {
		t.Skipf("no cgroup for the jail on this host (%v): limits fall back to rlimits", err)
	}
}

func TestForkBombIsContained(t *testing.T) {
	bomb, _ := newTestShell(t, func(p *Profile) { p.Limits.PIDs = 64 })
	requireCgroups(t, bomb)
	other, _ := newTestShell(t)
	mustRun(t, bomb, "export B=1")
	var wg sync.WaitGroup
	wg.Add(1)
	var res Result
	go func() {
		defer wg.Done()
		res = mustRun(t, bomb, "f() { f | f & }; f; sleep 100", ExecOptions{Timeout: 3 * time.Second})
	}()
	time.Sleep(time.Second)
	expectOut(t, other, "echo unaffected", 0, "unaffected")
	if n := len(bomb.cg.pids()); n > 64 {
		t.Errorf("%d processes in the bombed jail, limit 64", n)
	}
	wg.Wait()
	// Contained: the bomb hits the pids limit (fork failures), and the
	// command either runs into its timeout or fails when its own `sleep`
	// cannot fork, whichever comes first on a busy host.
	if (!res.TimedOut && res.ExitCode == 0) || !strings.Contains(string(res.Stderr), "fork") {
		t.Errorf("fork bomb: timed out %v, exit %d, stderr %.200q; want fork failures and a timeout or a failed command",
			res.TimedOut, res.ExitCode, res.Stderr)
	}
	res2 := mustRun(t, bomb, "echo $B", ExecOptions{Timeout: 10 * time.Second})
	if strings.TrimSpace(string(res2.Stdout)) != "1" {
		t.Fatalf("after the bomb: exit %d stdout %q stderr %.200q", res2.ExitCode, res2.Stdout, res2.Stderr)
	}
}

func TestMemoryHogIsKilledShellSurvives(t *testing.T) {
	sh, _ := newTestShell(t, func(p *Profile) { p.Limits.MemoryBytes = 128 << 20 })
	requireCgroups(t, sh)
	mustRun(t, sh, "cd /tmp && export M=1")
	res := mustRun(t, sh, "python3 -c 'b = bytearray(512 << 20); print(len(b))'")
	if res.ExitCode != 137 || res.ShellRestarted {
		t.Fatalf("memory hog: exit %d restarted %v stdout %q stderr %q; want 137 (OOM-killed) and the same shell",
			res.ExitCode, res.ShellRestarted, res.Stdout, res.Stderr)
	}
	assertState(t, sh, "/tmp", "M", "1")
}

func TestCloseLeavesNothingBehind(t *testing.T) {
	sh, _ := newTestShell(t)
	mustRun(t, sh, "sleep 1000 & (sleep 1000 &) ; sleep 1000 >/dev/null 2>&1 &")
	initPID := sh.jail.initPID
	cg := sh.cg
	var procs []int
	var cgDirs []string
	if cg != nil {
		procs = cg.pids()
		cgDirs = append(cgDirs, cg.dirs...)
		if len(procs) < 5 {
			t.Errorf("cgroup lists %d processes, want bwrap, init, shell and 3 sleeps", len(procs))
		}
	}
	sh.Close()
	if _, err := os.Stat("/proc/" + strconv.Itoa(initPID)); err == nil {
		t.Errorf("jail init %d survived Close", initPID)
	}
	for _, pid := range procs {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("process %d of the jail survived Close", pid)
		}
	}
	if cg != nil {
		for _, dir := range cgDirs {
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("cgroup %s survived Close", dir)
			}
		}
	}
	if _, err := sh.Exec(context.Background(), "echo", ExecOptions{}); err != ErrClosed {
		t.Errorf("Exec after Close: %v, want ErrClosed", err)
	}
}

func TestStaleCgroupsOfDeadServersAreSwept(t *testing.T) {
	own, err := ownCgroups()
	if err != nil || CgroupMode() != "v1" {
		t.Skip("the sweep is exercised on cgroup v1 hosts like CI's")
	}
	parent := filepath.Join(cgroupRoot, "pids", own["pids"])
	if _, err := os.Stat(parent); err != nil {
		parent = filepath.Join(cgroupRoot, "pids")
	}
	// A pid that cannot be alive: above the kernel's maximum.
	stale := filepath.Join(parent, "warren-99999999-1")
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Skipf("cannot create cgroups here: %v", err)
	}
	mine := filepath.Join(parent, fmt.Sprintf("warren-%d-999999", os.Getpid()))
	if err := os.Mkdir(mine, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(mine)
	sweepStale(own)
	if _, err := os.Stat(stale); err == nil {
		os.Remove(stale)
		t.Fatal("the cgroup of a dead server survived the sweep")
	}
	if _, err := os.Stat(mine); err != nil {
		t.Fatal("the sweep removed a cgroup of this live server")
	}
}

func TestHomeKeepsDotfilesOutOfTheWorkspace(t *testing.T) {
	home := filepath.Join(testWorkspace(t), "home")
	sh, ws := newTestShell(t, func(p *Profile) { p.Home = home })
	mustRun(t, sh, "export KEEP=1")
	expectOut(t, sh, "mkdir -p ~/.cache/tool && echo cached > ~/.cache/tool/x && git config --global user.name agent && echo $HOME", 0, "/home/warren")
	if entries, _ := os.ReadDir(ws); len(entries) != 0 {
		t.Errorf("dotfiles landed in the workspace: %v", entries)
	}
	if b, err := os.ReadFile(filepath.Join(home, ".cache", "tool", "x")); err != nil || string(b) != "cached\n" {
		t.Errorf("home on the host: %q %v", b, err)
	}
	mustRun(t, sh, "kill -9 $$") // a fresh shell finds the same home
	expectOut(t, sh, "cat ~/.cache/tool/x; git config --global user.name", 0, "cached\nagent")
}

// TestConcurrentStartsDoNotNestCgroups starts jails at the same moment:
// each gets a cgroup beside the others, never inside another jail's (the
// thread that forks a jail sits in its cgroup for a moment).
func TestConcurrentStartsDoNotNestCgroups(t *testing.T) {
	const n = 8
	shells := make([]*Shell, n)
	for i := range shells {
		shells[i], _ = newTestShell(t)
	}
	requireCgroups(t, shells[0])
	var wg sync.WaitGroup
	for _, sh := range shells[1:] {
		wg.Go(func() { mustRun(t, sh, "true") })
	}
	wg.Wait()
	for _, sh := range shells {
		for _, dir := range sh.cg.dirs {
			if parent := filepath.Base(filepath.Dir(dir)); strings.HasPrefix(parent, "warren-") {
				t.Errorf("cgroup %s is nested in another jail's", dir)
			}
		}
	}
}

// TestSeccompRefusesKernelAttackSurface calls refused system calls
// directly (python3's ctypes), where the jail has no other wall in the way
// (ptrace of oneself needs no capability) or where it does.
func TestSeccompRefusesKernelAttackSurface(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the probe uses x86-64 system call numbers")
	}
	probe := `python3 -c '
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
def call(name, nr, *args):
    r = libc.syscall(nr, *args)
    print(name, "EPERM" if r == -1 and ctypes.get_errno() == errno.EPERM else "allowed:%d/%d" % (r, ctypes.get_errno()))
call("ptrace", 101, 0, 0, 0, 0)
call("io_uring_setup", 425, 1, 0)
call("keyctl", 250, 0, 0, 0, 0)
call("bpf", 321, 0, 0, 0)
call("getpid", 39)
'`
	on, _ := newTestShell(t)
	res := mustRun(t, on, probe)
	want := "ptrace EPERM\nio_uring_setup EPERM\nkeyctl EPERM\nbpf EPERM\ngetpid allowed"
	if !strings.HasPrefix(string(res.Stdout), want) {
		t.Errorf("with seccomp: %q (stderr %q), want %q…", res.Stdout, res.Stderr, want)
	}
	// The same probe without the filter: ptrace of oneself succeeds, which
	// shows the filter, not something else, refused it above.
	off, _ := newTestShell(t, func(p *Profile) { p.Seccomp = false })
	if res := mustRun(t, off, probe); !strings.HasPrefix(string(res.Stdout), "ptrace allowed:0") {
		t.Errorf("without seccomp: %q (stderr %q)", res.Stdout, res.Stderr)
	}
}
