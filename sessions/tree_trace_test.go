package sessions

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// After a session's jail has started, a diff, a measure of its disk use
// and the snapshot of a pause reach its workspace through the runner: the
// server's own threads make no system call naming an entry of the
// workspace. strace follows this test process (and only it: the runner was
// started before, in the jail) while they run.
func TestTheServerNamesNoWorkspaceEntryForDiffsSnapshotsAndUsage(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Fatal("strace is not installed: run 'just deps' (CI installs it)")
	}
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, QuotaBytes: 1 << 30})
	t.Cleanup(func() { m.Close(context.Background()) })
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	canary := "canary-" + NewID()
	run(t, m, "alice", s.ID, "mkdir -p "+canary+"d && echo changed > "+canary+"d/"+canary+".txt && echo home > $HOME/"+canary+".home")

	out := filepath.Join(t.TempDir(), "trace")
	// Only the calls that name a file (openat, stat, readlinkat, ...):
	// the trace stays small, and reading it back adds one line a look.
	cmd := exec.Command(strace, "-f", "-qq", "-e", "trace=%file", "-s", "256", "-o", out, "-p", strconv.Itoa(os.Getpid()))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
		}
	}
	t.Cleanup(stop)
	// Tracing has begun once a stat of a marker path shows in the trace.
	marker := func(name string) {
		t.Helper()
		p := filepath.Join(os.TempDir(), name+"-"+canary)
		for i := 0; ; i++ {
			os.Stat(p)
			if b, _ := os.ReadFile(out); bytes.Contains(b, []byte(p)) {
				return
			}
			if i > 3000 {
				t.Fatalf("strace never showed the marker %s", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	marker("begin")
	_, d, err := m.Diff(ctx, "alice", s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := m.Usage(s); err != nil || n <= 0 {
		t.Fatalf("usage %d, %v", n, err)
	}
	if _, err := m.Pause(ctx, "alice", s.ID); err != nil {
		t.Fatal(err)
	}
	marker("end")
	stop()
	if len(d.Files) == 0 || d.Files[0].Path != canary+"d/"+canary+".txt" {
		t.Fatalf("the diff did not see the workspace's file: %+v", d.Files)
	}
	trace, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(trace, []byte("\n")) {
		if bytes.Contains(line, []byte(canary)) && !bytes.Contains(line, []byte(os.TempDir()+"/begin-")) && !bytes.Contains(line, []byte(os.TempDir()+"/end-")) {
			t.Errorf("the server named a workspace entry: %s", line)
		}
	}
}
