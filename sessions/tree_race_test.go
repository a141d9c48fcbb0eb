package sessions

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A command in the jail swaps a workspace directory for a symlink to a
// decoy outside the workspace (in the jail's home, which the jail sees)
// while the server takes diffs and a snapshot through the runner's tree
// stream: the decoy's content never reaches a diff or the audit
// repository.
func TestRunnerTreeStreamNeverRecordsADecoyBehindASwappedSymlink(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data})
	t.Cleanup(func() { m.Close(context.Background()) })
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run(t, m, "alice", s.ID, `mkdir -p "$HOME/decoy" d && printf 'DECOY-%s\n' SECRET > "$HOME/decoy/f" && cp "$HOME/decoy/f" "$HOME/decoy/g" && echo inside > d/f &&
		for i in 1 2 3 4 5 6 7 8; do echo filler > more$i; done`)
	run(t, m, "alice", s.ID, `(while :; do mv d d.away; ln -s "$HOME/decoy" d; ln -s "$HOME/decoy/g" g; rm d g; mv d.away d; done) >/dev/null 2>&1 &`)
	diffs := 0
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		_, d, err := m.Diff(ctx, "alice", s.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		diffs++
		if strings.Contains(d.Patch, "DECOY-SECRET") {
			t.Fatalf("diff %d shows the decoy's content:\n%s", diffs, d.Patch)
		}
	}
	if _, err := m.Pause(ctx, "alice", s.ID); err != nil {
		t.Fatal(err)
	}
	if diffs < 5 {
		t.Fatalf("only %d diffs raced the swaps", diffs)
	}
	// Every object of the audit repository, decompressed.
	out, err := exec.Command("git", "-C", m.auditDir(s.ID), "cat-file", "--batch-all-objects", "--batch").Output()
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("the audit repository holds no objects")
	}
	if bytes.Contains(out, []byte("DECOY-SECRET")) {
		t.Fatal("the audit repository holds the decoy's content")
	}
	if !bytes.Contains(out, []byte("inside")) {
		t.Fatal("the audit repository lacks the workspace's own file")
	}
}
