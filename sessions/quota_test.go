package sessions

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner"
)

// quotaSession returns a manager with a 5 MiB quota and a fresh session in
// it, on a data directory the jail can reach.
func quotaSession(t *testing.T) (*Manager, *Session) {
	t.Helper()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, QuotaBytes: quota5M, QuotaInterval: 1})
	t.Cleanup(func() { m.Close(context.Background()) })
	s, err := m.Create(context.Background(), "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

const quota5M = 5 << 20

// used is what a user checks with du: the blocks under the session's
// workspace and home.
func used(t *testing.T, m *Manager, s *Session) int64 {
	t.Helper()
	w, err := runner.DiskUsage(s.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	h, err := runner.DiskUsage(m.homeDir(s.ID))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return w + h
}

// tryRun is run without failing the test when the command is refused.
func tryRun(m *Manager, id, command string) (CommandResult, error) {
	o, err := m.Exec(context.Background(), "alice", id, command, ExecOptions{Timeout: 30 * time.Second})
	if err == nil {
		err = o.StateErr
	}
	return o.Result, err
}

// saysOverQuota checks that a result tells the user, in words, that the
// quota was crossed, how much is used and what to do.
func saysOverQuota(t *testing.T, res CommandResult) {
	t.Helper()
	e := string(res.Stderr)
	if !strings.Contains(e, "over its quota of 5.0 MiB") || !strings.Contains(e, "rm") || !strings.Contains(e, "MiB") {
		t.Fatalf("the result does not say the quota was crossed: exit %d stderr %q", res.ExitCode, e)
	}
}

func TestQuotaStopsOneCommandWritingPastIt(t *testing.T) {
	m, s := quotaSession(t)
	res := run(t, m, "alice", s.ID, "dd if=/dev/zero of=big bs=1M count=100")
	// RLIMIT_FSIZE stops the one file at the quota: the overshoot is the
	// directories' blocks.
	if u := used(t, m, s); u > quota5M+64<<10 {
		t.Fatalf("one command wrote %s against a quota of 5 MiB", FormatBytes(u))
	}
	saysOverQuota(t, res)
}

func TestQuotaStopsABackgroundJobWritingManyFiles(t *testing.T) {
	m, s := quotaSession(t)
	res := run(t, m, "alice", s.ID, "(i=0; while true; do i=$((i+1)); head -c 1M /dev/zero > f$i; sleep 0.05; done) >/dev/null 2>&1 &")
	if res.ExitCode != 0 {
		t.Fatalf("start the job: %+v", res)
	}
	// (dash has no $RANDOM.) With no command running, the watcher alone
	// stops the job: the whole jail goes.
	waitUntil(t, func() bool { return !m.Running(s.ID) })
	stopped := run(t, m, "alice", s.ID, "true")
	if !stopped.ShellRestarted {
		t.Fatalf("the next command does not say that the shell was restarted: %+v", stopped)
	}
	saysOverQuota(t, stopped)
	before := used(t, m, s)
	// Bound: the quota plus what the job writes in one polling interval
	// and one measurement (1 MiB per 50 ms here).
	if before > quota5M+16<<20 {
		t.Fatalf("the background job wrote %s against a quota of 5 MiB", FormatBytes(before))
	}
	run(t, m, "alice", s.ID, "sleep 0.5")
	if after := used(t, m, s); after > before {
		t.Fatalf("the background job still writes: %s, then %s", FormatBytes(before), FormatBytes(after))
	}
}

func TestQuotaCountsTheHomeDirectory(t *testing.T) {
	m, s := quotaSession(t)
	res := run(t, m, "alice", s.ID, "head -c 100M /dev/zero > $HOME/big; ls -s $HOME/big")
	if u := used(t, m, s); u > quota5M+64<<10 {
		t.Fatalf("a command wrote %s in $HOME against a quota of 5 MiB", FormatBytes(u))
	}
	saysOverQuota(t, res)
	h, _ := runner.DiskUsage(m.homeDir(s.ID))
	if h < 4<<20 {
		t.Fatalf("the home holds %s: the test did not write there", FormatBytes(h))
	}
}

func TestQuotaOverItCommandsCannotGrowUsageWhateverTheyAreCalled(t *testing.T) {
	m, s := quotaSession(t)
	// A fake rm first on PATH that writes 50 MiB: the word "rm" must not
	// be a pass.
	run(t, m, "alice", s.ID, `mkdir -p bin && printf '#!/bin/sh\nhead -c 50M /dev/zero > /workspace/junk\n' > bin/rm && chmod +x bin/rm && export PATH=/workspace/bin:$PATH`)
	if err := os.WriteFile(filepath.Join(s.Workspace, "big"), make([]byte, 6<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	before := used(t, m, s)
	for _, command := range []string{"rm big", "rm -f big", "head -c 3M /dev/zero > more"} {
		res, err := tryRun(m, s.ID, command)
		if err != nil {
			t.Fatalf("%s over quota: %v (commands run; they may not grow usage)", command, err)
		}
		if u := used(t, m, s); u > before+64<<10 {
			t.Fatalf("%q grew usage over the quota from %s to %s", command, FormatBytes(before), FormatBytes(u))
		}
		saysOverQuota(t, res)
	}
	// A real rm frees space, and then the session writes again.
	res := run(t, m, "alice", s.ID, "/bin/rm -f big junk more")
	if u := used(t, m, s); u > quota5M || res.ExitCode != 0 {
		t.Fatalf("rm over quota: exit %d, %s used, stderr %q", res.ExitCode, FormatBytes(u), res.Stderr)
	}
	res = run(t, m, "alice", s.ID, "head -c 1M /dev/zero > ok && wc -c < ok")
	if strings.TrimSpace(string(res.Stdout)) != "1048576" || strings.Contains(string(res.Stderr), "quota") {
		t.Fatalf("after freeing space: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// A session is told its quota is nearly full even when, while its command
// wrote, something else on the same file system freed more than it wrote:
// the file system's growth, which estimates the usage between walks, then
// shows none (CI runs other packages' tests on the same disk).
func TestNearlyFullQuotaIsToldWhileOtherFilesAreFreed(t *testing.T) {
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, QuotaBytes: quota5M, QuotaInterval: time.Hour})
	t.Cleanup(func() { m.Close(context.Background()) })
	s, err := m.Create(context.Background(), "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run(t, m, "alice", s.ID, "true")
	// Outside the session, on the same file system: 8 MiB, on disk.
	other := filepath.Join(data, "other")
	f, err := os.Create(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 8<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	go func() {
		// Once the command wrote its file, free the other one, then let
		// the command end.
		for {
			if st, err := os.Stat(filepath.Join(s.Workspace, "big")); err == nil && st.Size() == 4800000 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		os.Remove(other)
		os.WriteFile(filepath.Join(s.Workspace, "go"), nil, 0o644)
	}()
	res := run(t, m, "alice", s.ID, "head -c 4800000 /dev/zero > big; while [ ! -e go ]; do sleep 0.01; done")
	if e := string(res.Stderr); !strings.Contains(e, "of its 5.0 MiB disk quota") {
		t.Fatalf("the result does not warn of the nearly full quota (%s used): exit %d stderr %q",
			FormatBytes(used(t, m, s)), res.ExitCode, e)
	}
}

// The estimates between walks read the file system through a descriptor
// the manager holds, one per file system, opened on a real directory: a
// link in its place is not followed (the file systems are found again by
// path at every walk), and growth written after the walk is counted.
func TestQuotaEstimatesHoldOneDescriptorPerFileSystem(t *testing.T) {
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, QuotaBytes: quota5M, QuotaInterval: time.Hour})
	s := &Session{Meta: Meta{ID: "s-fs", Mode: ModeEmpty}, Workspace: m.workspaceDir("s-fs")}
	for _, d := range []string{s.Workspace, m.homeDir(s.ID)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(data, &st); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	var h fsHandles
	if fd := h.get(st.Fsid.Val, link); fd != -1 {
		t.Fatalf("a link was opened for the file system: fd %d", fd)
	}
	u := m.quota.get(s.ID)
	u.mu.Lock()
	defer u.mu.Unlock()
	m.walkLocked(s, u, true)
	if len(u.fs) != 1 || u.fs[0].fd < 0 {
		t.Fatalf("workspace and home share a file system, and it should be held once: %+v", u.fs)
	}
	var held unix.Statfs_t
	if err := unix.Fstatfs(u.fs[0].fd, &held); err != nil || held.Fsid != st.Fsid {
		t.Fatalf("the held descriptor is not on the data directory's file system: %v", err)
	}
	// Other tests share the disk and may free space meanwhile: a few tries.
	for try := range 5 {
		before := u.bytes
		if err := os.WriteFile(filepath.Join(s.Workspace, fmt.Sprint("grown", try)), make([]byte, 8<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		m.estimateLocked(s, u, true)
		if u.bytes >= before+4<<20 {
			return
		}
	}
	t.Fatalf("the estimate did not grow with 8 MiB written, five times: %s, walked %s", FormatBytes(u.bytes), FormatBytes(u.walked))
}

// waitUntil polls cond until it holds, failing the test after 10 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkQuotaEstimate is what every command of a session with a quota
// pays twice (before it starts and after it ends): the usage estimated from
// the file systems' growth since the last walk.
// go test -run X -bench QuotaEstimate ./sessions/
func BenchmarkQuotaEstimate(b *testing.B) {
	data := b.TempDir()
	m := newManager(b, openDB(b, data), Config{DataDir: data, QuotaBytes: quota5M, QuotaInterval: time.Hour})
	s := &Session{Meta: Meta{ID: "s-empty", Mode: ModeEmpty}, Workspace: m.workspaceDir("s-empty")}
	for _, d := range []string{s.Workspace, m.homeDir(s.ID)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	u := m.quota.get(s.ID)
	u.mu.Lock()
	defer u.mu.Unlock()
	m.walkLocked(s, u, true)
	for b.Loop() {
		m.estimateLocked(s, u, true)
	}
}
