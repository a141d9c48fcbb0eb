package sandbox

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
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

// shellChildren lists the shell's direct children. The shell is single
// threaded, so one file holds them all.
func shellChildren(shellPID int) []int {
	p := strconv.Itoa(shellPID)
	data, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
	if err != nil || len(data) == 0 {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if c, err := strconv.Atoi(f); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// signalCommand sends sig to the shell's children that are not background
// jobs of earlier commands (those alive when the previous command ended),
// and to everything below them: the running command and whatever it
// spawned. It returns how many processes were signalled.
func signalCommand(shellPID int, background []int, sig syscall.Signal) int {
	n := 0
	for _, child := range shellChildren(shellPID) {
		if slices.Contains(background, child) {
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
