package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStopAllKillsTheCommandAndBackgroundJobsAndSaysWhy(t *testing.T) {
	sh, dir := newTestShell(t)
	mustRun(t, sh, "cd /tmp && export KEPT=1")
	if sh.Background() {
		t.Fatal("an idle shell reports background processes")
	}
	mustRun(t, sh, "(while :; do date > /workspace/tick; sleep 0.02; done) >/dev/null 2>&1 &")
	if !sh.Background() {
		t.Fatal("a background job is not reported")
	}
	done := make(chan Result)
	go func() { done <- mustRun(t, sh, "sleep 30") }()
	waitFor(t, sh.Busy)
	if !sh.StopAll("warren: stopped for a test") {
		t.Fatal("StopAll found no jail")
	}
	res := <-done
	if !res.ShellRestarted || !strings.HasSuffix(string(res.Stderr), "warren: stopped for a test\n") {
		t.Fatalf("the stopped command: restarted %v stderr %q", res.ShellRestarted, res.Stderr)
	}
	assertState(t, sh, "/tmp", "KEPT", "1")
	// The background job died with the jail: the file stops changing.
	before, _ := os.ReadFile(filepath.Join(dir, "tick"))
	mustRun(t, sh, "sleep 0.2")
	after, _ := os.ReadFile(filepath.Join(dir, "tick"))
	if string(before) != string(after) || sh.Background() {
		t.Fatal("the background job survived StopAll")
	}
}

func TestLimitFileSizeZeroStopsWritesNotTheShell(t *testing.T) {
	sh, dir := newTestShell(t)
	mustRun(t, sh, "true")
	sh.LimitFileSize(0)
	res := mustRun(t, sh, "echo data > a; head -c 4096 /dev/zero > b; touch c && echo created")
	if res.ShellRestarted || strings.TrimSpace(string(res.Stdout)) != "created" {
		t.Fatalf("over a zero file-size limit: %+v", res)
	}
	for _, name := range []string{"a", "b"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() != 0 {
			t.Fatalf("%s was written under a zero file-size limit: %v", name, err)
		}
	}
	if res := mustRun(t, sh, "ulimit -f unlimited || ulimit -S -f 100; echo x > d; cat d"); strings.TrimSpace(string(res.Stdout)) != "" {
		t.Fatalf("the jail lifted its file-size limit: %q", res.Stdout)
	}
	sh.LimitFileSize(-1)
	expectOut(t, sh, "head -c 4096 /dev/zero > b && wc -c < b", 0, "4096")
}

func TestAfterCommandNoteEndsTheResult(t *testing.T) {
	dir := testWorkspace(t)
	var calls int
	sh, err := NewShell(DefaultProfile(dir), Options{AfterCommand: func() string {
		calls++
		return "warren: note " + strings.Repeat("n", calls)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	var streamed strings.Builder
	res, err := sh.Exec(context.Background(), "printf 'no newline' >&2", ExecOptions{Timeout: 30 * time.Second,
		OnOutput: func(s Stream, p []byte) {
			if s == Stderr {
				streamed.Write(p)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	want := "no newline\nwarren: note n\n"
	if string(res.Stderr) != want || streamed.String() != want {
		t.Fatalf("stderr %q, streamed %q; want %q", res.Stderr, streamed.String(), want)
	}
}
