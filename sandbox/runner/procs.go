package runner

import (
	"os"
	"strconv"
	"strings"
)

// Children lists the direct children of pid, over all its threads (from
// /proc: the jail's own for the runner, the host's for the server's jail
// code, which uses this one too).
func Children(pid int) []int {
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
		out = appendPIDs(out, data)
	}
	return out
}

func appendPIDs(out []int, data []byte) []int {
	for _, f := range strings.Fields(string(data)) {
		if c, err := strconv.Atoi(f); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// ShellChildren lists the shell's direct children. The shell is single
// threaded, so one file holds them all.
func ShellChildren(pid int) []int {
	p := strconv.Itoa(pid)
	data, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
	if err != nil {
		return nil
	}
	return appendPIDs(nil, data)
}
