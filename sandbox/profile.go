package sandbox

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// MountPoint is where the workspace appears inside every jail.
const MountPoint = "/workspace"

// HomeDir is where Profile.Home appears inside the jail.
const HomeDir = "/home/warren"

// Profile describes one jail. Everything not granted here is denied: the
// jail starts from an empty root, and only what BwrapArgs adds is visible.
type Profile struct {
	// Workspace is the host directory bound read-write at MountPoint.
	Workspace string
	// ReadOnlyWorkspace binds the workspace read-only (archived sessions).
	ReadOnlyWorkspace bool
	// Network shares the host's network namespace. Off by default.
	Network bool
	// Egress, when set, lets the jail's HTTP and HTTPS out through warren's
	// filtering proxy (allowlist mode; see network.go). Exclusive with
	// Network.
	Egress *Egress
	// TmpSize and ShmSize bound the tmpfs mounted at /tmp and /dev/shm.
	TmpSize, ShmSize int64
	// Env is the shell's environment on top of the fixed PATH, HOME, LANG,
	// TERM and USER. It is handed to the shell over its control pipe, never
	// on bwrap's command line, where /proc/1/cmdline would show it.
	Env map[string]string
	// UID and GID are the ids the jail's user has inside the jail.
	UID, GID int
	// HostUID and HostGID are the host ids the jail runs as when the server
	// runs as root; -1 picks the workspace's owner, or 65534 (nobody) when
	// the workspace belongs to root. Ignored when the server is not root.
	HostUID, HostGID int
	// Home, when set, is a host directory bound read-write at HomeDir and
	// used as $HOME, so that caches and dotfiles (~/.cache, ~/.gitconfig,
	// ~/.npm) stay out of the workspace. Empty: $HOME is the workspace.
	Home string
	// Hostname is the jail's host name.
	Hostname string
	// Seccomp refuses system calls a shell never needs (ptrace, bpf,
	// io_uring, mount, unshare, keyrings, …) with EPERM.
	Seccomp bool
	// Limits bound what the jail may consume.
	Limits Limits
	// User names whom the jail works for. The running jails of one user
	// share a parent cgroup bounded by UserLimits, so that many sessions
	// do not add up to many times one jail's limits. Empty: no per-user
	// limits.
	User string
	// UserLimits bound all running jails of User together, in this server.
	UserLimits UserLimits
}

// UserLimits bound the jails of one user together. A zero field means "no
// limit of this kind".
type UserLimits struct {
	// MemoryBytes caps the memory of all the user's jails together: past
	// it, the biggest process among them is OOM-killed.
	MemoryBytes int64
	// CPUs caps their CPU time together, in cores.
	CPUs float64
	// PIDs caps their processes together (cgroup pids.max).
	PIDs int64
	// Jails caps how many of them run at once; one more fails to start
	// with a UserJailsError.
	Jails int
}

// Limits bound a jail. A zero field means "no limit of this kind".
type Limits struct {
	// PIDs caps the number of processes in the jail (cgroup pids.max).
	PIDs int64
	// MemoryBytes caps the jail's memory (cgroup memory limit); the
	// biggest process is OOM-killed, the shell survives.
	MemoryBytes int64
	// CPUs caps CPU time in cores (cgroup CPU quota), e.g. 1.5.
	CPUs float64
	// FileSizeBytes caps the size of any file written (RLIMIT_FSIZE).
	FileSizeBytes int64
	// OpenFiles caps open descriptors per process (RLIMIT_NOFILE).
	OpenFiles uint64
	// Processes caps processes of the jail's host uid (RLIMIT_NPROC); only
	// effective when the jail runs as a non-root host uid.
	Processes uint64
}

// DefaultProfile returns the deny-everything profile for a workspace: no
// network, 256 MiB /tmp, 64 MiB /dev/shm, 256 processes, 2 GiB memory, one
// CPU, 1 GiB per file, 1024 open files.
func DefaultProfile(workspace string) Profile {
	return Profile{
		Workspace: workspace,
		TmpSize:   256 << 20,
		ShmSize:   64 << 20,
		UID:       1000,
		GID:       1000,
		HostUID:   -1,
		HostGID:   -1,
		Hostname:  "warren",
		Seccomp:   true,
		Limits: Limits{
			PIDs:          256,
			MemoryBytes:   2 << 30,
			CPUs:          1,
			FileSizeBytes: 1 << 30,
			OpenFiles:     1024,
			Processes:     4096,
		},
	}
}

// baseEnv is the environment every jailed shell starts with, besides HOME.
var baseEnv = [][2]string{
	{"PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"},
	{"LANG", "C.UTF-8"},
	{"TERM", "dumb"},
	{"USER", "warren"},
	{"SHELL", "/bin/sh"},
	// Inside the jail a root-owned checkout appears to belong to nobody,
	// and git would refuse it as "dubious ownership". Everything the jail
	// can see is its own workspace, so every directory is safe. (git reads
	// safe.directory from this "command line" configuration.)
	{"GIT_CONFIG_COUNT", "1"},
	{"GIT_CONFIG_KEY_0", "safe.directory"},
	{"GIT_CONFIG_VALUE_0", "*"},
}

// Validate reports what is wrong with a profile before any process starts.
func (p Profile) Validate() error {
	if p.Workspace == "" {
		return fmt.Errorf("profile: workspace is empty")
	}
	if !filepath.IsAbs(p.Workspace) {
		return fmt.Errorf("profile: workspace %q is not an absolute path", p.Workspace)
	}
	if p.Home != "" && !filepath.IsAbs(p.Home) {
		return fmt.Errorf("profile: home %q is not an absolute path", p.Home)
	}
	if p.UID < 0 || p.GID < 0 {
		return fmt.Errorf("profile: jail uid/gid must not be negative")
	}
	if p.Egress != nil {
		if err := p.Egress.validate(p); err != nil {
			return err
		}
	}
	for k := range p.Env {
		if !validEnvName(k) {
			return fmt.Errorf("profile: %q is not a valid environment variable name", k)
		}
	}
	return nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		ok := c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			return false
		}
	}
	return true
}

// JailFDs are descriptors, as numbered in bwrap's process, that BwrapArgs
// names; -1 leaves one out.
type JailFDs struct {
	// Info is where bwrap writes the jail's pid.
	Info int
	// Seccomp holds the seccomp program bwrap loads before the command.
	Seccomp int
	// Runner is a read-only descriptor of the runner's binary, which the
	// jail executes (/proc/self/fd/N): the jail's uid needs no access to
	// its host path, and nothing is mounted. Conn is the first of the
	// runner's two connection descriptors: the pipe it reads requests from,
	// then (Conn+1) the pipe it writes to. Below 3, the jail runs no runner.
	Runner, Conn int
	// ProxyCtl (the jail's end of the proxy socket) serves Profile.Egress:
	// the runner forwards the jail's connections on it.
	ProxyCtl int
	// Workspace, when 3 or more, is an open descriptor of the workspace
	// directory, bound by descriptor (--bind-fd) rather than by its path.
	Workspace int
	// Shell, when 3 or more, is the first of four descriptors: the jail's
	// ends of the shell's pipes (stdin's read end, the status, stdout and
	// stderr write ends), which the runner starts the shell on
	// (proto.OpShellAttach).
	Shell int
}

// BwrapArgs builds bubblewrap's argument list (without the program name)
// for a profile; the jailed command follows "--". It is pure: the same
// profile always gives the same argv.
func BwrapArgs(p Profile, fds JailFDs, command ...string) []string {
	a := []string{
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--clearenv",
		"--uid", strconv.Itoa(p.UID), "--gid", strconv.Itoa(p.GID),
	}
	if p.Network {
		a = append(a, "--share-net")
	}
	if p.Hostname != "" {
		a = append(a, "--hostname", p.Hostname)
	}
	home := MountPoint
	if p.Home != "" {
		home = HomeDir
	}
	a = append(a, "--setenv", "HOME", home)
	for _, kv := range baseEnv {
		a = append(a, "--setenv", kv[0], kv[1])
	}
	a = append(a,
		"--ro-bind", "/usr", "/usr",
		"--symlink", "usr/bin", "/bin",
		"--symlink", "usr/sbin", "/sbin",
		"--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64",
		"--ro-bind", "/etc", "/etc",
		"--proc", "/proc",
		"--dev", "/dev",
	)
	a = appendTmpfs(a, p.TmpSize, "/tmp")
	a = appendTmpfs(a, p.ShmSize, "/dev/shm")
	bind, src := "--bind", p.Workspace
	if fds.Workspace >= 3 {
		bind, src = "--bind-fd", strconv.Itoa(fds.Workspace)
	}
	if p.ReadOnlyWorkspace {
		bind = strings.Replace(bind, "--", "--ro-", 1)
	}
	a = append(a, bind, src, MountPoint)
	if p.Home != "" {
		a = append(a, "--bind", p.Home, HomeDir)
	}
	a = append(a, "--chdir", MountPoint, "--remount-ro", "/")
	if fds.Info >= 0 {
		a = append(a, "--info-fd", strconv.Itoa(fds.Info))
	}
	if fds.Seccomp >= 0 {
		a = append(a, "--seccomp", strconv.Itoa(fds.Seccomp))
	}
	a = append(a, "--")
	return append(a, runnerCommand(p, fds, command)...)
}

func appendTmpfs(a []string, size int64, path string) []string {
	if size > 0 {
		a = append(a, "--size", strconv.FormatInt(size, 10))
	}
	return append(a, "--perms", "1777", "--tmpfs", path)
}

// envScript renders the profile's extra variables as shell exports, sorted
// so the script is stable.
func envScript(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString("export " + k + "=" + shellQuote(env[k]) + "\n")
	}
	return b.String()
}

// shellQuote quotes s for a POSIX shell: single quotes, with each ' written
// as '\”.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
