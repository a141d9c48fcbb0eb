// Command benchcheck reads `go test -bench` output on stdin, compares every
// ratio a benchmark reports with its target, prints one line per target,
// and exits non-zero when a target is missed or a targeted ratio was not
// reported at all (a benchmark that stopped running must not pass).
//
// Benchmarks report ratios to floors measured in the same run (`NAME/floor`
// metrics), never absolute times, so that a target means the same on a
// slow or busy machine. The targets live here, and only here.
//
//	go test -run '^$' -bench . -benchtime 2000x ./... | go run ./cmd/benchcheck
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// target is the largest acceptable value of a ratio metric.
type target struct {
	max  float64
	why  string
	seen bool
	got  float64
}

// targets maps a metric unit, as benchmarks report it, to its target.
func targets() map[string]*target {
	return map[string]*target{
		// cmd/warren BenchmarkStdioAgainstFloors: p50 over 2,000 calls against
		// a bare mcp-go tool returning the same payload (plus, for
		// shell_exec, a persistent jailed /bin/sh answering over a pipe).
		"shell_exec/floor": {max: 1.25, why: "shell_exec echo hi vs bare MCP tool + raw jailed sh"},
		// read_file's target is the runner's issue's: the file is read by the
		// jail's runner, a round trip to another process the floor has not
		// (docs/performance.md, "Where a read_file goes").
		"read_file/floor":  {max: 1.30, why: "read_file 4 KB (through the jail's runner) vs bare MCP tool with the same payload"},
		"write_file/floor": {max: 1.5, why: "write_file 4 KB vs bare MCP tool writing the same 4 KB atomically"},
		// sandbox: the Shell's protocol against the raw jailed sh. An
		// external command pays, besides the protocol's fixed cost, the
		// seccomp filter on every system call and the cgroup's accounting
		// on its fork, which the floor's jail has not: security, not
		// overhead. A builtin shows the protocol's fixed cost alone (the
		// shell's redirections, `export -p` and two writes, 24 system calls
		// through the seccomp filter, the status pipe read by the waiting
		// goroutine itself) against a round trip of 9-45 µs, whose spread
		// (where the two processes happen to run) makes this ratio swing:
		// 1.3-3.2 measured after the protocol was cut, 4.4 before.
		"exec-external/floor": {max: 1.3, why: "Shell.Exec 'ls /' vs raw jailed sh (no seccomp, no cgroup)"},
		"exec-builtin/floor":  {max: 4.0, why: "Shell.Exec 'echo hi' vs raw jailed sh: the protocol's fixed cost"},
		// cmd/warren BenchmarkObsOverhead: shell_exec echo hi p50 with
		// tracing exported over OTLP and metrics served, against both off.
		"obs-overhead": {max: 1.03, why: "shell_exec echo hi, metrics and tracing on vs off"},
		// agent BenchmarkToolRoundTripOverhead: p50 of warren's own time per
		// tool round trip (model's last byte → next request, minus the
		// tool's time) against the 2 ms target of issue 12. An absolute
		// target, unlike the floors: the 2 ms are the budget itself.
		"agent-overhead/2ms": {max: 1.0, why: "agent's own time per tool round trip vs 2 ms"},
		// cmd/warren BenchmarkIdleRSS: VmRSS of an idle 'serve stdio' after
		// initialize and tools/list, median of 5, against 35 MB. Absolute,
		// like the agent's: memory does not drift with the machine's load.
		"idle-rss/35MB": {max: 1.0, why: "VmRSS of an idle serve stdio vs 35 MB"},
		// cmd/warren BenchmarkSessions200: Pss of one idle jail (bwrap, its
		// init, the shell and the runner), averaged over 200, against 3 MB.
		"jail-pss/3MB": {max: 1.0, why: "Pss per idle jail, runner included, vs 3 MB"},
	}
}

func main() {
	ok, err := check(os.Stdin, os.Stdout, targets())
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchcheck:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// check reads benchmark output from r, echoes it to w, then prints the
// verdict; ok is false when any target was missed or not measured.
func check(r io.Reader, w io.Writer, ts map[string]*target) (bool, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(w, line)
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		// BenchmarkX-2  2000  0 ns/op  1.23 shell_exec/floor  ...
		f := strings.Fields(line)
		for i := 2; i+1 < len(f); i += 2 {
			t, ok := ts[f[i+1]]
			if !ok {
				continue
			}
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return false, fmt.Errorf("%s: value %q of %s is not a number", f[0], f[i], f[i+1])
			}
			t.seen, t.got = true, v
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	names := make([]string, 0, len(ts))
	for n := range ts {
		names = append(names, n)
	}
	sort.Strings(names)
	ok := true
	fmt.Fprintln(w, "\ntarget check:")
	for _, n := range names {
		t := ts[n]
		switch {
		case !t.seen:
			ok = false
			fmt.Fprintf(w, "  MISSING %-22s target ≤ %.2f× (%s): no benchmark reported it\n", n, t.max, t.why)
		case t.got > t.max:
			ok = false
			fmt.Fprintf(w, "  MISS    %-22s %.2f× > %.2f× (%s)\n", n, t.got, t.max, t.why)
		default:
			fmt.Fprintf(w, "  ok      %-22s %.2f× ≤ %.2f× (%s)\n", n, t.got, t.max, t.why)
		}
	}
	return ok, nil
}
