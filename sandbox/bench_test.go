package sandbox

// Benchmarks measure the Shell against its physical floor in the same run,
// interleaved, because this machine's absolute times drift: the floor is a
// persistent jailed /bin/sh (the same bwrap argv, seccomp aside) answering
// over a pipe with nothing but the command's output, which is what running
// a command in a warm jail cannot avoid. Each reports p50s and the ratio
// `NAME/floor`; `just bench-check` compares the ratios with their targets
// (cmd/benchcheck holds them).

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// rawJail is the floor: /bin/sh in a jail, driven line by line.
type rawJail struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startRawJail(b *testing.B) *rawJail {
	bwrap, err := FindBwrap("")
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bwrap, BwrapArgs(DefaultProfile(testWorkspace(b)), JailFDs{Info: -1, Seccomp: -1}, "/bin/sh")...)
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	return &rawJail{cmd: cmd, in: in, out: bufio.NewReader(out)}
}

// run sends a command whose output ends with a line "." and reads up to it.
func (j *rawJail) run(b *testing.B, command string) time.Duration {
	t0 := time.Now()
	if _, err := io.WriteString(j.in, command+"; echo .\n"); err != nil {
		b.Fatal(err)
	}
	for {
		line, err := j.out.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		if line == ".\n" {
			return time.Since(t0)
		}
	}
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// benchAgainstFloor runs command b.N times in a warm Shell and in the raw
// jail, alternating, and reports both p50s and their ratio.
func benchAgainstFloor(b *testing.B, name, command string) {
	sh, _ := newTestShell(b)
	raw := startRawJail(b)
	ctx := context.Background()
	exec := func() time.Duration {
		t0 := time.Now()
		res, err := sh.Exec(ctx, command, ExecOptions{})
		d := time.Since(t0)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
		return d
	}
	for range 20 { // warm both: page cache, the jails' first forks
		exec()
		raw.run(b, command)
	}
	var got, floor []time.Duration
	b.ResetTimer()
	for range b.N {
		got = append(got, exec())
		floor = append(floor, raw.run(b, command))
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(us(p50(got)), name+"-p50-µs")
	b.ReportMetric(us(p50(floor)), "floor-p50-µs")
	b.ReportMetric(float64(p50(got))/float64(p50(floor)), name+"/floor")
}

// BenchmarkExecBuiltin: a builtin in a warm shell against the raw jail.
func BenchmarkExecBuiltin(b *testing.B) { benchAgainstFloor(b, "exec-builtin", "echo hi") }

// BenchmarkExecExternal: an external command in a warm shell against the
// raw jail running the same command (one fork each).
func BenchmarkExecExternal(b *testing.B) { benchAgainstFloor(b, "exec-external", "ls / >/dev/null") }

// BenchmarkColdStart: a new Shell and its first command (target ≤ 40 ms).
func BenchmarkColdStart(b *testing.B) {
	dir := testWorkspace(b)
	ctx := context.Background()
	d := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		sh, err := NewShell(DefaultProfile(dir), Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sh.Exec(ctx, "echo hi", ExecOptions{}); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(t0))
		b.StopTimer()
		sh.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(p50(d))/float64(time.Millisecond), "cold-start-p50-ms")
}
