package sandbox

import "github.com/warrenhq/warren/sandbox/runner"

// descendants lists every process below pid, parents before children.
func descendants(pid int) []int {
	var out []int
	queue := runner.Children(pid)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, p)
		queue = append(queue, runner.Children(p)...)
	}
	return out
}
