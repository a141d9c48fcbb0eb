package sandbox

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox/runner"
	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// A runner on the network is someone else's machine: everything it says
// about a command goes through the same checks as a jail's runner. These
// runners lie on purpose; each is served in this process, and the shell
// dials it through a Dialer as it would a pod's runner.

// lyingRunner serves shell.exec with exec, counting the connections made.
type lyingRunner struct {
	exec  runner.Handler
	dials atomic.Int64
}

func (l *lyingRunner) dial(ctx context.Context) (*client.Conn, error) {
	l.dials.Add(1)
	a, b := net.Pipe()
	ops := map[string]runner.Handler{proto.OpShellExec: l.exec}
	go func() { _ = runner.NewServer(ops).Serve(b); b.Close() }()
	return client.New(a), nil
}

func netRecord(tag byte, body []byte) []byte {
	r := make([]byte, proto.RecHeader, proto.RecHeader+len(body))
	r[0] = tag
	binary.BigEndian.PutUint32(r[1:], uint32(len(body)))
	return append(r, body...)
}

func netShell(t *testing.T, l *lyingRunner) *Shell {
	t.Helper()
	sh, err := NewNetShell(DefaultProfile("/workspace"), l.dial, Options{State: &State{Cwd: "/workspace/src"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	return sh
}

// A runner that floods a command's output gets no more of the server's
// memory than a jail's command does: head and tail kept, every byte
// counted.
func TestNetRunnerFloodIsCappedAndCounted(t *testing.T) {
	chunk := netRecord(proto.RecStdout, []byte(strings.Repeat("x", 1<<20)))
	const n = 64 // 64 MiB of stdout
	l := &lyingRunner{exec: func(c *runner.Call) (any, error) {
		for range n {
			if _, err := c.Out.Write(chunk); err != nil {
				return nil, err
			}
		}
		return proto.ShellExecResult{ExitCode: 0, Cwd: "/workspace"}, nil
	}}
	res, err := netShell(t, l).Exec(context.Background(), "yes", ExecOptions{Timeout: time.Minute, MaxOutput: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.StdoutBytes != n<<20 || !res.Truncated || len(res.Stdout) > 64<<10+1024 {
		t.Fatalf("a flood: %d bytes counted, %d kept, truncated %v", res.StdoutBytes, len(res.Stdout), res.Truncated)
	}
}

// What breaks the protocol (an oversized exports record, a record of a
// tag the protocol has not, a stream cut inside a record) or claims a
// directory no shell can have is not believed: the connection is hung up,
// the command reports the lost shell, and the saved state is kept.
func TestNetRunnerLiesAreNotBelieved(t *testing.T) {
	lies := map[string]func(c *runner.Call) (any, error){
		"oversized exports": func(c *runner.Call) (any, error) {
			h := make([]byte, proto.RecHeader)
			h[0] = proto.RecExports
			binary.BigEndian.PutUint32(h[1:], proto.StatusCap+1)
			c.Out.Write(h)
			c.Out.Write([]byte("export X='1'\n"))
			return proto.ShellExecResult{Cwd: "/etc", Exports: 9}, nil
		},
		"unknown record": func(c *runner.Call) (any, error) {
			c.Out.Write(netRecord(9, []byte("boo")))
			return proto.ShellExecResult{Cwd: "/etc"}, nil
		},
		"cut record": func(c *runner.Call) (any, error) {
			c.Out.Write(netRecord(proto.RecStdout, []byte("hello"))[:7])
			return proto.ShellExecResult{Cwd: "/etc"}, nil
		},
	}
	for name, lie := range lies {
		t.Run(name, func(t *testing.T) {
			l := &lyingRunner{exec: lie}
			sh := netShell(t, l)
			res, err := sh.Exec(context.Background(), "true", ExecOptions{Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if !res.ShellRestarted || res.ExitCode == 0 {
				t.Fatalf("a lying runner's result was believed: %+v", res)
			}
			if st := sh.State(); st.Cwd != "/workspace/src" || len(st.Env) != 0 {
				t.Fatalf("the state after a lie: %+v", st)
			}
			if sh.LiveRunner() != nil {
				t.Fatal("the connection to a runner that broke the protocol is still used")
			}
		})
	}
	bad := []string{"relative", "/a\x00b", "/" + strings.Repeat("d", proto.MaxCwd)}
	for _, cwd := range bad {
		l := &lyingRunner{exec: func(c *runner.Call) (any, error) { return proto.ShellExecResult{Cwd: cwd}, nil }}
		sh := netShell(t, l)
		if _, err := sh.Exec(context.Background(), "true", ExecOptions{Timeout: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if st := sh.State(); st.Cwd != "/workspace/src" {
			t.Errorf("cwd %.20q was taken: %q", cwd, st.Cwd)
		}
	}
}

// A runner that never answers does not hold the session: past the
// command's timeout and the grace period the server hangs up, and the
// command reports a timeout.
func TestNetRunnerThatNeverAnswersIsHungUpOn(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	l := &lyingRunner{exec: func(c *runner.Call) (any, error) {
		mu.Lock()
		calls++
		mu.Unlock()
		select {} // wedged, whatever the server says
	}}
	sh := netShell(t, l)
	res, err := sh.Exec(context.Background(), "true", ExecOptions{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || !res.ShellRestarted {
		t.Fatalf("a wedged runner's command: %+v", res)
	}
	if sh.LiveRunner() != nil {
		t.Fatal("the wedged runner's connection is still used")
	}
}
