package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/warrenhq/warren/sandbox/runner"
)

// A command that fills the jail's process limit (a fork bomb that returns
// at once and leaves its processes running) would leave every later
// command of the session failing with "Cannot fork" until one of them
// timed out and its kill happened to catch the bomb. The kernel counts
// every fork refused at the cgroup's pids.max (the "max" line of
// pids.events, on v1 and v2); when that count has moved since the last
// look, the processes in the jail besides the shell are stopped, after the
// command that hit the limit and before the next one (a bomb may fill the
// jail only after its command returned).

// forkRefusals reads how many forks the cgroup's pids.max has refused.
func (cg *cgroup) forkRefusals() int64 {
	if cg.events == nil {
		return 0
	}
	var buf [128]byte
	n, _ := cg.events.ReadAt(buf[:], 0) // a short read ends with io.EOF
	for _, line := range bytes.Split(buf[:n], []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("max ")); ok {
			n, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}

// waitUncharged waits, up to a second, until the cgroup counts at most n
// processes. A killed process leaves cgroup.procs when it exits but is
// counted in pids.current until it is reaped (by the jail's init, which
// adopts orphans, at once; the shell reaps its own children at the start
// of the next command, so they are part of n): a fork right after the
// kills would still find the jail full.
func (cg *cgroup) waitUncharged(n int) {
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		data, err := os.ReadFile(filepath.Join(cg.dirs[0], "pids.current"))
		if err != nil {
			return
		}
		cur, err := strconv.Atoi(string(bytes.TrimSpace(data)))
		if err != nil || cur <= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// stopLeftoversAtLimit stops every process in j besides the shell (and
// bwrap and the jail's init, which hold it) when a fork was refused at the
// jail's process limit since the last call, and leaves a line for the
// result's stderr that says so. Called with the turn held.
func (s *Shell) stopLeftoversAtLimit(j *jail) {
	s.mu.Lock()
	cg := s.cg
	s.mu.Unlock()
	if cg == nil || s.profile.Limits.PIDs <= 0 {
		return
	}
	n := cg.forkRefusals()
	if n <= cg.refused {
		return
	}
	cg.refused = n
	if !j.alive() {
		return // a new jail starts with its cgroup emptied (ensureJail)
	}
	keep := map[int]bool{j.shell(): true, j.initPID: true}
	if j.cmd.Process != nil {
		keep[j.cmd.Process.Pid] = true
	}
	stopped := map[int]bool{}
	// A process may fork while its siblings die: repeat until a pass
	// finds none. Each pass kills what it lists, so the bomb shrinks.
	for pass := 0; pass < 1000; pass++ {
		found := false
		for _, pid := range cg.pids() {
			if keep[pid] || j.isRunner(pid) {
				continue
			}
			found = true
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				stopped[pid] = true
			}
		}
		if !found {
			break
		}
	}
	cg.waitUncharged(len(keep) + 1 + len(runner.ShellChildren(j.shell()))) // 1: the runner
	cg.refused = cg.forkRefusals()                                         // the kills above may race with refusals
	if len(stopped) == 0 {
		return
	}
	note := "warren: the jail reached its limit of " + strconv.FormatInt(s.profile.Limits.PIDs, 10) +
		" processes (forks failed); the " + strconv.Itoa(len(stopped)) +
		" processes running besides the shell were stopped, background jobs included (the shell, its cwd and exports are kept)"
	s.mu.Lock()
	s.notes = append(s.notes, note)
	s.mu.Unlock()
}
