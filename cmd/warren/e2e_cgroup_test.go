package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A server that starts sweeps the cgroups a killed server left behind at
// once, not when it starts its own first jail.
func TestServerSweepsStaleCgroupsAtStart(t *testing.T) {
	needJail(t)
	parent := ownPidsCgroup(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(parent, fmt.Sprintf("warren-%d-1", dead.Process.Pid))
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatalf("make a stale cgroup (the tests run as root on a host with cgroups): %v", err)
	}
	t.Cleanup(func() { os.Remove(stale) })
	c := serveStdio(t, "--data-dir", jailDir(t))
	c.ok("session_list", nil) // no jail starts
	waitFor(t, "the stale cgroup to be removed", 10*time.Second, func() bool {
		_, err := os.Stat(stale)
		return os.IsNotExist(err)
	})
}

// ownPidsCgroup is the directory of this process's pids cgroup (v1) or of
// its cgroup (v2), where a server started from here makes its own.
func ownPidsCgroup(t *testing.T) string {
	t.Helper()
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "pids" {
			return filepath.Join("/sys/fs/cgroup/pids", parts[2])
		}
		if parts[0] == "0" && parts[1] == "" {
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
				return filepath.Join("/sys/fs/cgroup", parts[2])
			}
		}
	}
	t.Fatal("no pids cgroup in /proc/self/cgroup")
	return ""
}
