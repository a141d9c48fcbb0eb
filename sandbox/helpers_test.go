package sandbox

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// testWorkspace makes a workspace the jail's uid can reach. t.TempDir's
// parent is mode 0700, which a jail running as nobody (under root) cannot
// search.
func testWorkspace(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "warren-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// newTestShell starts a shell on a fresh workspace; edit adjusts the profile.
func newTestShell(t testing.TB, edit ...func(*Profile)) (*Shell, string) {
	t.Helper()
	dir := testWorkspace(t)
	p := DefaultProfile(dir)
	for _, e := range edit {
		e(&p)
	}
	sh, err := NewShell(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	return sh, dir
}

// mustRun executes a command with a generous timeout and fails the test on an
// Exec error.
func mustRun(t testing.TB, sh *Shell, command string, opts ...ExecOptions) Result {
	t.Helper()
	o := ExecOptions{Timeout: 30 * time.Second}
	if len(opts) > 0 {
		o = opts[0]
	}
	res, err := sh.Exec(context.Background(), command, o)
	if err != nil {
		t.Fatalf("Exec(%q): %v", command, err)
	}
	return res
}

// expectOut runs a command and checks its exit code and trimmed stdout.
func expectOut(t testing.TB, sh *Shell, command string, code int, stdout string) Result {
	t.Helper()
	res := mustRun(t, sh, command)
	if res.ExitCode != code || strings.TrimSpace(string(res.Stdout)) != stdout {
		t.Fatalf("%q: exit %d stdout %q stderr %q; want exit %d stdout %q",
			command, res.ExitCode, res.Stdout, res.Stderr, code, stdout)
	}
	return res
}

// assertState checks that cd and export effects are in place.
func assertState(t testing.TB, sh *Shell, cwd, name, value string) {
	t.Helper()
	expectOut(t, sh, `printf '%s|%s' "$PWD" "$`+name+`"`, 0, cwd+"|"+value)
}

// waitFor polls cond until it holds, failing the test after 10 s: tests
// wait for what they need, not for a guessed time.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
