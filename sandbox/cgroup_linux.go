package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupRoot is where cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroup is one jail's control group: a directory per v1 controller (pids,
// memory, cpu) or one v2 directory. The jail is started inside it, so every
// process of the jail is counted and can be killed together.
type cgroup struct {
	v2   bool
	dirs []string // created directories; dirs[0] lists the jail's processes
	// home maps each v1 directory to the one the server thread came from,
	// so the thread can return after starting the jail.
	home map[string]string
	fd   int      // v2: open directory for CLONE_INTO_CGROUP
	oom  oomCount // metrics.go
	// events is pids.events, opened once: reading it again at offset 0
	// costs one pread (3 µs) where opening it costs 25 µs, twice per
	// command (leftovers_linux.go). nil without a pids limit.
	events *os.File
	// refused is pids.events' "max" count at the last look; only a
	// command's turn touches it.
	refused int64
}

var (
	cgroupSeq atomic.Int64
	sweepOnce sync.Once
)

// sweepStale removes the cgroups of warren servers that died without
// cleaning up (kill -9): their names carry the dead server's pid. Their
// jails died with the server (Pdeathsig); anything left is killed.
func sweepStale(own map[string]string) {
	var parents []string
	if CgroupMode() == "v2" {
		parents = []string{filepath.Join(cgroupRoot, own[""])}
	} else {
		for _, ctrl := range v1Controllers {
			parents = append(parents, ownDirV1(own, ctrl))
		}
	}
	for _, parent := range parents {
		// warren-<pid>-<seq> for a jail, warren-<pid>-user-<name> for a
		// user's jails together (removed with the jails nested in it).
		dirs, _ := filepath.Glob(filepath.Join(parent, "warren-*-*"))
		for _, dir := range dirs {
			pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(filepath.Base(dir), "warren-"), "-", 2)[0])
			if err != nil || pid == os.Getpid() {
				continue
			}
			if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
				continue // that server is alive
			}
			stale := &cgroup{v2: CgroupMode() == "v2", dirs: []string{dir}, fd: -1}
			stale.remove()
		}
	}
}

// SweepStaleCgroups removes, once per process, the cgroups left by warren
// servers that were killed (kill -9, a crash): a server calls it when it
// starts, so that a dead server's limits and leftovers do not wait for
// this one's first jail. Hosts without cgroups have nothing to sweep.
func SweepStaleCgroups() {
	own, err := ownCgroups()
	if err != nil || CgroupMode() == "" {
		return
	}
	sweepOnce.Do(func() { sweepStale(own) })
}

// CgroupMode says how a host can bound jails: "v2", "v1" or "" for none.
func CgroupMode() string {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		return "v2"
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "pids", "tasks")); err == nil {
		return "v1"
	}
	return ""
}

// newCgroup creates a cgroup for one jail with the given limits, beside
// the server's own. It fails when the host does not let this process
// create cgroups; the caller falls back to rlimits.
func newCgroup(l Limits) (*cgroup, error) { return newCgroupIn(nil, l) }

// newCgroupIn creates a cgroup for one jail inside parent (a user's
// cgroup), or beside the server's own when parent is nil.
func newCgroupIn(parent *cgroup, l Limits) (*cgroup, error) {
	cg, err := createCgroup(parent, fmt.Sprintf("warren-%d-%d", os.Getpid(), cgroupSeq.Add(1)), cgroupSettings(l, CgroupMode() == "v2"))
	if err == nil && l.PIDs > 0 {
		cg.events, _ = os.Open(filepath.Join(cg.dirs[0], "pids.events")) // nil: never counted
	}
	return cg, err
}

// v1Controllers are the cgroup v1 hierarchies a jail is placed in, in the
// order of cgroup.dirs.
var v1Controllers = []string{"pids", "memory", "cpu"}

// setting is one file written in a new cgroup. Optional ones may be missing
// (memsw exists only with swap accounting).
type setting struct {
	ctrl, file, value string
	optional          bool
}

// cgroupSettings turns limits into cgroup files for v1 or v2.
func cgroupSettings(l Limits, v2 bool) []setting {
	var out []setting
	if l.PIDs > 0 {
		out = append(out, setting{"pids", "pids.max", strconv.FormatInt(l.PIDs, 10), false})
	}
	if l.MemoryBytes > 0 {
		v := strconv.FormatInt(l.MemoryBytes, 10)
		if v2 {
			out = append(out, setting{"memory", "memory.max", v, false}, setting{"memory", "memory.swap.max", "0", true})
		} else {
			out = append(out, setting{"memory", "memory.limit_in_bytes", v, false}, setting{"memory", "memory.memsw.limit_in_bytes", v, true})
		}
	}
	if l.CPUs > 0 {
		quota := strconv.FormatInt(int64(l.CPUs*100000), 10)
		if v2 {
			out = append(out, setting{"cpu", "cpu.max", quota + " 100000", false})
		} else {
			out = append(out, setting{"cpu", "cpu.cfs_period_us", "100000", false}, setting{"cpu", "cpu.cfs_quota_us", quota, false})
		}
	}
	return out
}

// createCgroup makes cgroup name inside parent (nil: beside the server's
// own cgroups) and writes the settings into it.
func createCgroup(parent *cgroup, name string, settings []setting) (*cgroup, error) {
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	sweepOnce.Do(func() { sweepStale(own) })
	switch CgroupMode() {
	case "v2":
		dir := filepath.Join(cgroupRoot, own[""])
		if parent != nil {
			dir = parent.dirs[0]
		}
		return newCgroupV2(dir, name, settings)
	case "v1":
		return newCgroupV1(own, parent, name, settings)
	}
	return nil, errors.New("no cgroup hierarchy is mounted at " + cgroupRoot)
}

// ownDirV1 is the server's own cgroup directory of one v1 controller.
func ownDirV1(own map[string]string, ctrl string) string {
	mount := filepath.Join(cgroupRoot, ctrl)
	dir := filepath.Join(mount, own[ctrl])
	if _, err := os.Stat(dir); err != nil {
		return mount // inside a cgroup namespace the mount is our root
	}
	return dir
}

func newCgroupV1(own map[string]string, parent *cgroup, name string, settings []setting) (*cgroup, error) {
	cg := &cgroup{home: map[string]string{}, fd: -1}
	for i, ctrl := range v1Controllers {
		// The starting thread comes back to the server's own cgroup, never
		// to a user's, where it would be counted with their jails.
		home := ownDirV1(own, ctrl)
		in := home
		if parent != nil {
			in = parent.dirs[i]
		}
		dir := filepath.Join(in, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			cg.remove()
			return nil, fmt.Errorf("create %s cgroup: %w", ctrl, err)
		}
		cg.dirs = append(cg.dirs, dir)
		cg.home[dir] = home
		for _, st := range settings {
			if st.ctrl != ctrl {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, st.file), []byte(st.value), 0); err != nil && !st.optional {
				cg.remove()
				return nil, fmt.Errorf("set %s: %w", st.file, err)
			}
		}
	}
	return cg, nil
}

func newCgroupV2(parent, name string, settings []setting) (*cgroup, error) {
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	cg := &cgroup{v2: true, dirs: []string{dir}, fd: -1}
	for _, st := range settings {
		err := os.WriteFile(filepath.Join(dir, st.file), []byte(st.value), 0)
		if err != nil && !st.optional {
			cg.remove()
			return nil, fmt.Errorf("set %s (is the controller enabled in %s/cgroup.subtree_control?): %w", st.file, parent, err)
		}
	}
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		cg.remove()
		return nil, fmt.Errorf("open cgroup: %w", err)
	}
	cg.fd = fd
	return cg, nil
}

var (
	ownOnce sync.Once
	own     map[string]string
	ownErr  error
)

// ownCgroups returns the server's own cgroups: controller → path ("" for
// v2). They are read once, before any thread moves: /proc/self/cgroup shows
// the main thread, which may be the one briefly inside a jail's cgroup
// while it forks bwrap, and a cgroup created then would nest in the jail's.
func ownCgroups() (map[string]string, error) {
	ownOnce.Do(func() { own, ownErr = readOwnCgroups() })
	return own, ownErr
}

func readOwnCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	own := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			own[ctrl] = parts[2]
		}
	}
	return own, sc.Err()
}

// enterThread moves the calling OS thread into the cgroup (v1), so that the
// jail forked from it starts inside. The caller has locked the thread.
func (cg *cgroup) enterThread() error {
	if cg.v2 {
		return nil // v2 uses CLONE_INTO_CGROUP instead
	}
	tid := strconv.Itoa(unix.Gettid())
	for _, dir := range cg.dirs {
		if err := os.WriteFile(filepath.Join(dir, "tasks"), []byte(tid), 0); err != nil {
			cg.leaveThread()
			return fmt.Errorf("join cgroup: %w", err)
		}
	}
	return nil
}

// leaveThread moves the calling thread back where it came from.
func (cg *cgroup) leaveThread() {
	if cg.v2 {
		return
	}
	tid := strconv.Itoa(unix.Gettid())
	for _, dir := range cg.dirs {
		_ = os.WriteFile(filepath.Join(cg.home[dir], "tasks"), []byte(tid), 0)
	}
}

// pids lists the processes in the cgroup.
func (cg *cgroup) pids() []int {
	data, err := os.ReadFile(filepath.Join(cg.dirs[0], "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// killAll kills every process in the cgroup and waits briefly until it is
// empty. v2 has cgroup.kill; v1 needs a loop, since a process may fork
// while its siblings die.
func (cg *cgroup) killAll() {
	if cg.v2 {
		if os.WriteFile(filepath.Join(cg.dirs[0], "cgroup.kill"), []byte("1"), 0) == nil {
			cg.waitEmpty(time.Second)
			return
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		pids := cg.pids()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (cg *cgroup) waitEmpty(d time.Duration) {
	deadline := time.Now().Add(d)
	for len(cg.pids()) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// remove kills what is left and deletes the cgroup directories.
func (cg *cgroup) remove() {
	oomKills.forget(cg) // its last kills count
	if cg.events != nil {
		cg.events.Close() // a read racing with it fails, and counts nothing
	}
	if len(cg.dirs) > 0 {
		cg.killAll()
	}
	if cg.fd >= 0 {
		unix.Close(cg.fd)
		cg.fd = -1
	}
	for _, dir := range cg.dirs {
		removeCgroupDir(dir)
	}
	cg.dirs = nil
}

// removeCgroupDir removes dir and any cgroup nested in it, retrying briefly
// while the kernel finishes tearing down the processes that left it.
func removeCgroupDir(dir string) {
	if subs, err := os.ReadDir(dir); err == nil {
		for _, e := range subs {
			if e.IsDir() {
				sub := &cgroup{dirs: []string{filepath.Join(dir, e.Name())}, fd: -1}
				sub.killAll()
				removeCgroupDir(sub.dirs[0])
			}
		}
	}
	for i := 0; i < 50; i++ {
		if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
