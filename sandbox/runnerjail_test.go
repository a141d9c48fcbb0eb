package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

func newRunnerJail(t *testing.T, dir string) *RunnerJail {
	t.Helper()
	j, err := NewRunnerJail(dir, RunnerJailOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// A runner jail serves its directory and nothing else of the host: its
// runner reads the directory's files, sees no /etc, no /tmp and no shell,
// and starts again after it was killed.
func TestRunnerJailServesOnlyItsDirectory(t *testing.T) {
	dir := testWorkspace(t)
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("in the jail\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j := newRunnerJail(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := j.Runner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	read := func(p string) (string, *proto.FileFault) {
		st, err := c.Open(ctx, proto.OpFileRead, proto.FileReadArgs{Path: p, Limit: 1 << 20}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := st.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		var res proto.FileReadResult
		if err := st.Result(&res); err != nil {
			t.Fatal(err)
		}
		return b.String(), res.Fault
	}
	if got, f := read("f.txt"); got != "in the jail\n" || f != nil {
		t.Fatalf("f.txt: %q %+v", got, f)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")); err != nil {
		t.Fatal(err)
	}
	if got, f := read("passwd"); got != "" || f == nil || f.Kind != proto.FaultOutside {
		t.Fatalf("a link to /etc/passwd: %q %+v", got, f)
	}
	// Nothing but the directory (and, for a dynamic runner, /usr) is
	// mounted: the du of /etc and /tmp finds neither.
	var du proto.DiskUsageResult
	if err := c.Call(ctx, proto.OpDiskUsage, proto.DiskUsageArgs{Dirs: []string{"/etc", "/tmp", "/home/warren"}}, nil, &du); err != nil {
		t.Fatal(err)
	}
	for i, e := range du.Errors {
		if e != "missing" {
			t.Errorf("%d: the runner jail has it: %q", i, e)
		}
	}

	// Killed from outside, the runner comes back on the next call.
	j.mu.Lock()
	p := j.live
	j.mu.Unlock()
	killed := 0
	for _, pid := range descendants(p.cmd.Process.Pid) {
		if p.id.isRunner(pid) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed++
		}
	}
	if killed != 1 {
		t.Fatalf("killed %d runners", killed)
	}
	<-c.Done()
	c2, err := j.Runner(ctx)
	if err != nil || c2 == c {
		t.Fatalf("after the kill: %v (same connection: %v)", err, c2 == c)
	}
	c = c2
	if got, f := read("f.txt"); got != "in the jail\n" || f != nil {
		t.Fatalf("f.txt after the restart: %q %+v", got, f)
	}
	if j.starts != 2 {
		t.Fatalf("%d starts", j.starts)
	}
}

// The runner jail binds /usr only for a runner linked dynamically.
func TestDynamicTellsStaticFromDynamic(t *testing.T) {
	static, err := FindRunner("") // runnertest builds it with CGO_ENABLED=0
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want bool
	}{{static, false}, {"/usr/bin/bwrap", true}} {
		f, err := os.Open(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := dynamic(f); got != c.want {
			t.Errorf("dynamic(%s) = %v, want %v", c.path, got, c.want)
		}
		f.Close()
	}
}
