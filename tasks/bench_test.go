package tasks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions/sqlschema"
	"github.com/warrenhq/warren/sessions/sqlschema/sqltest"
)

// boardTarget is issue 10's bound on a claim or an update, p50, on a board
// of 1,000 tasks and 1 MB.
const boardTarget = 5 * time.Millisecond

// BenchmarkBoardOps measures claim and update on a board of 1,000 tasks
// and about 1 MB, with the file written as the server writes it: each
// change returns once TASKS.md holds it. It reports p50 and p95, the ratio
// of each p50 to the 5 ms target, and the process's CPU time per change
// (which a busy machine stretches less than wall time), and fails when a
// p50 is over the target on SQLite. Run it with 'just bench-tasks'. The
// board is measured in a workspace, its file read and written by the
// board's runner in its jail (as 'serve --workspace' has it), and outside
// every workspace, by the server itself.
func BenchmarkBoardOps(b *testing.B) {
	b.Run("workspace", func(b *testing.B) { benchBoardOps(b, true) })
	b.Run("outside", func(b *testing.B) { benchBoardOps(b, false) })
}

func benchBoardOps(b *testing.B, inWorkspace bool) {
	ctx := context.Background()
	dir := b.TempDir()
	if inWorkspace {
		// The board's jail runs as the workspace's owner: under root,
		// another uid, which must reach it.
		os.Chmod(filepath.Dir(dir), 0o755)
		if os.Geteuid() == 0 {
			os.Chown(dir, jailUID, jailUID)
		}
	}
	path := filepath.Join(dir, "docs", "TASKS.md")
	os.MkdirAll(filepath.Dir(path), 0o755)
	var sb strings.Builder
	sb.WriteString("# Board\n\n")
	pad := strings.Repeat("x", 100)
	for n := 1; n <= 1000; n++ {
		fmt.Fprintf(&sb, "- [ ] T-%d Task number %d of the big board\n", n, n)
		for k := range 8 {
			fmt.Fprintf(&sb, "  - 2026-05-01 10:%02d @alice: note %d %s\n", k, k, pad)
		}
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	if inWorkspace && os.Geteuid() == 0 {
		os.Chown(filepath.Dir(path), jailUID, jailUID)
		os.Chown(path, jailUID, jailUID)
	}
	db := openDB(b, b.TempDir())
	opts := Options{Path: path, Coalesce: 200 * time.Millisecond}
	if inWorkspace {
		j, err := sandbox.NewRunnerJail(dir, sandbox.RunnerJailOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if opts.File, err = RunnerFile(RunnerOptions{Conn: j.Runner, Workspace: dir, Path: path, Close: j.Close}); err != nil {
			b.Fatal(err)
		}
	}
	board, err := Open(ctx, db, opts)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := board.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(path)
	const ops = 500
	var claims, updates []time.Duration
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		for i := range ops {
			id := fmt.Sprintf("T-%d", 1+i*7%1000)
			h := Holder{User: "bench", Session: fmt.Sprintf("s-%d", i)}
			start := time.Now()
			if _, err := board.Claim(ctx, id, h, 0); err != nil {
				b.Fatal(err)
			}
			claims = append(claims, time.Since(start))
			start = time.Now()
			if _, err := board.Update(ctx, id, Change{Note: "progress " + pad}, h); err != nil {
				b.Fatal(err)
			}
			updates = append(updates, time.Since(start))
			if err := board.Release(ctx, id, h); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	cpu := (cpuTime() - cpu0) / time.Duration(3*ops*b.N) // claim, update, release
	if err := board.Close(ctx); err != nil {
		b.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	if strings.Count(string(after), "@bench: progress") < ops {
		b.Fatal("the updates never reached the file")
	}
	cp50, cp95 := quantiles(claims)
	up50, up95 := quantiles(updates)
	b.ReportMetric(ms64(cp50), "claim-p50-ms")
	b.ReportMetric(ms64(cp95), "claim-p95-ms")
	b.ReportMetric(ms64(up50), "update-p50-ms")
	b.ReportMetric(ms64(up95), "update-p95-ms")
	b.ReportMetric(ms64(cpu), "cpu-ms/change")
	b.ReportMetric(ms64(cp50)/ms64(boardTarget), "claim-p50/target")
	b.ReportMetric(ms64(up50)/ms64(boardTarget), "update-p50/target")
	b.Logf("board of 1000 tasks, %d bytes: claim p50 %v p95 %v, update p50 %v p95 %v (target p50 < %v); CPU %v per change",
		fi.Size(), cp50, cp95, up50, up95, boardTarget, cpu)
	b.Logf("database: %s", sqltest.Dialect())
	// The target is the embedded default's; PostgreSQL's figures, a
	// server round trip per statement, are reported (docs/postgres.md).
	if sqltest.Dialect() == sqlschema.SQLite && (cp50 > boardTarget || up50 > boardTarget) {
		b.Fatalf("over the %v target: claim p50 %v, update p50 %v", boardTarget, cp50, up50)
	}
}

// cpuTime is the CPU time this process used so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func quantiles(ds []time.Duration) (p50, p95 time.Duration) {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2], s[len(s)*95/100]
}

func ms64(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
