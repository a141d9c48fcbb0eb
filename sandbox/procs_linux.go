package sandbox

import (
	"os"
	"strconv"
	"strings"
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
