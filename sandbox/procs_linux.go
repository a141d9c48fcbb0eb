package sandbox

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// children lists the direct children of pid, over all its threads.
func children(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		data, err := os.ReadFile(dir + "/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// descendants lists every process below pid, parents before children.
func descendants(pid int) []int {
	var out []int
	queue := children(pid)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, p)
		queue = append(queue, children(p)...)
	}
	return out
}

// startTick returns when pid started, in clock ticks since boot (field 22
// of /proc/pid/stat).
func startTick(pid int) (uint64, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')') // comm may hold spaces and parentheses
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); starttime is field 22.
	if len(fields) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(fields[19], 10, 64)
	return v, err == nil
}

// userHZ is the kernel's clock tick for /proc times; 100 on every Linux
// architecture Go supports.
const userHZ = 100

// bootTick returns the current time in clock ticks since boot, comparable
// with startTick.
func bootTick() uint64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0
	}
	return uint64(ts.Sec)*userHZ + uint64(ts.Nsec)/(1e9/userHZ)
}

// signalCommand sends sig to the shell's children that started at or after
// tick, and to everything below them: the running command and whatever it
// spawned. Background jobs from earlier commands are left alone. It returns
// how many processes were signalled.
func signalCommand(shellPID int, tick uint64, sig syscall.Signal) int {
	n := 0
	for _, child := range children(shellPID) {
		if st, ok := startTick(child); !ok || st < tick {
			continue
		}
		for _, pid := range append([]int{child}, descendants(child)...) {
			if syscall.Kill(pid, sig) == nil {
				n++
			}
		}
	}
	return n
}
