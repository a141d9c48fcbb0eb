package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Check is one finding of Doctor.
type Check struct {
	Name   string // what was checked
	OK     bool
	Detail string // what was found
	Fix    string // what to run when not OK
	// Required checks must pass for jails to work; the others only weaken
	// limits.
	Required bool
}

// Doctor checks that this host can run jails and says how to fix what it
// cannot. It starts a real jail as its last check.
func Doctor(ctx context.Context) []Check {
	var checks []Check
	add := func(c Check) { checks = append(checks, c) }

	path, err := FindBwrap("")
	if err != nil {
		add(Check{Name: "bubblewrap installed", Required: true,
			Detail: err.Error(),
			Fix:    "apt-get install -y bubblewrap (Debian/Ubuntu) or dnf install bubblewrap (Fedora)"})
		return checks
	}
	add(Check{Name: "bubblewrap installed", OK: true, Required: true, Detail: path})

	out, _ := exec.CommandContext(ctx, path, "--version").Output()
	major, minor, ok := bwrapVersion(string(out))
	verOK := ok && (major > 0 || minor >= 7)
	add(Check{Name: "bubblewrap ≥ 0.7 (--size, --disable-userns)", OK: verOK, Required: true,
		Detail: strings.TrimSpace(string(out)),
		Fix: "install bubblewrap 0.7 or newer (Debian 12 ships 0.8; on Ubuntu 22.04 use the " +
			"jammy-backports package or build it from source)"})

	if data, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil {
		n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		add(Check{Name: "user namespaces enabled", OK: n > 0, Required: true,
			Detail: "user.max_user_namespaces = " + strings.TrimSpace(string(data)),
			Fix:    "sysctl -w user.max_user_namespaces=15000 (and persist it in /etc/sysctl.d/)"})
	}
	if os.Geteuid() != 0 {
		if data, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil {
			v := strings.TrimSpace(string(data))
			add(Check{Name: "unprivileged user namespaces allowed", OK: v == "1", Required: true,
				Detail: "kernel.unprivileged_userns_clone = " + v,
				Fix:    "sysctl -w kernel.unprivileged_userns_clone=1"})
		}
		if data, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil {
			v := strings.TrimSpace(string(data))
			add(Check{Name: "AppArmor allows user namespaces", OK: v != "1", Required: true,
				Detail: "kernel.apparmor_restrict_unprivileged_userns = " + v,
				Fix: "add an AppArmor profile for " + path + " with 'userns,' (see docs/SECURITY.md), " +
					"or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"})
		}
	}

	mode := CgroupMode()
	cg, cgErr := newCgroup(Limits{PIDs: 16, MemoryBytes: 64 << 20})
	if cg != nil {
		cg.remove()
	}
	cgCheck := Check{Name: "cgroups for memory, pids and CPU limits", OK: cgErr == nil,
		Detail: "cgroup " + mode + ": per-jail cgroups work"}
	if cgErr != nil {
		cgCheck.Detail = fmt.Sprintf("cgroup %q: %v; jails fall back to rlimits (file size, open files, processes)", mode, cgErr)
		cgCheck.Fix = "run warren as root, or under systemd delegation: " +
			"systemd-run --user --scope -p Delegate=yes warren serve ..."
	}
	add(cgCheck)

	add(tryJail(ctx, path))
	return checks
}

// tryJail starts a real jail with the default profile and runs a command.
func tryJail(ctx context.Context, bwrap string) Check {
	c := Check{Name: "a jail starts and runs a command", Required: true}
	dir, err := os.MkdirTemp("", "warren-doctor-")
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	defer os.RemoveAll(dir)
	sh, err := NewShell(DefaultProfile(dir), Options{Bwrap: bwrap})
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	defer sh.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := sh.Exec(ctx, "echo ok", ExecOptions{Timeout: 10 * time.Second})
	switch {
	case err != nil:
		c.Detail = err.Error()
		c.Fix = jailFix(err.Error())
	case strings.TrimSpace(string(res.Stdout)) != "ok":
		c.Detail = fmt.Sprintf("unexpected output %q (stderr %q)", res.Stdout, res.Stderr)
	default:
		c.OK = true
		c.Detail = "ran 'echo ok' in a jail"
	}
	return c
}

// jailFix maps bwrap's known failures to what fixes them.
func jailFix(msg string) string {
	switch {
	case strings.Contains(msg, "Creating new namespace failed"),
		strings.Contains(msg, "No permissions to create new namespace"):
		return "bwrap cannot create namespaces here: inside a container, run it with " +
			"--security-opt seccomp=unconfined --security-opt apparmor=unconfined (or --privileged), " +
			"or enable unprivileged user namespaces on the host"
	case strings.Contains(msg, "setting up uid map"), strings.Contains(msg, "uid map"):
		return "the kernel refused the uid map: check AppArmor's userns restriction and user.max_user_namespaces"
	case strings.Contains(msg, "Unknown option"):
		return "bubblewrap is too old: install 0.7 or newer"
	}
	return "see the message above; 'bwrap --ro-bind / / true' reproduces the simplest case"
}

var versionRe = regexp.MustCompile(`(\d+)\.(\d+)`)

func bwrapVersion(s string) (major, minor int, ok bool) {
	m := versionRe.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, false
	}
	major, _ = strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	return major, minor, true
}
