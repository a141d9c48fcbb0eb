package runner

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
	"github.com/warrenhq/warren/sessions/errs"
)

// These tests run the runner's shell on the host, without a jail, in a
// temporary directory: they check the protocol (records, reply, busy,
// start, end); what a user sees of the shell is tested in sandbox, in
// real jails.

type execOut struct {
	stdout, stderr, exports []byte
	exportsSeen             bool
	res                     proto.ShellExecResult
}

// execute runs command and splits its output into records.
func execute(t *testing.T, c *client.Conn, command string, args proto.ShellExecArgs) (execOut, error) {
	t.Helper()
	var o execOut
	args.Length = len(command)
	st, err := c.Open(context.Background(), proto.OpShellExec, args, []byte(command))
	if err != nil {
		return o, err
	}
	defer st.Close()
	var all []byte
	for {
		b, err := st.Next()
		if err != nil {
			break
		}
		all = append(all, b...)
	}
	if err := st.Result(&o.res); err != nil {
		return o, err
	}
	for len(all) > 0 {
		if len(all) < proto.RecHeader {
			t.Fatalf("a cut record: %q", all)
		}
		n := int(binary.BigEndian.Uint32(all[1:5]))
		body := all[proto.RecHeader : proto.RecHeader+n]
		switch all[0] {
		case proto.RecStdout:
			o.stdout = append(o.stdout, body...)
		case proto.RecStderr:
			o.stderr = append(o.stderr, body...)
		case proto.RecExports:
			o.exports, o.exportsSeen = body, true
		default:
			t.Fatalf("record tag %d", all[0])
		}
		all = all[proto.RecHeader+n:]
	}
	return o, nil
}

func TestShellExecRecordsAndReply(t *testing.T) {
	c := pair(t, Ops())
	dir := t.TempDir()
	if _, err := execute(t, c, "echo hi", proto.ShellExecArgs{TimeoutMS: 10000}); errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("a command before the shell started: %v, want unavailable", err)
	}
	init := "cd " + shellQuote(dir) + "\n"
	o, err := execute(t, c, "echo out; echo err >&2; export W=1; exit_code=3; (exit 3)", proto.ShellExecArgs{TimeoutMS: 10000, Init: init, NProc: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if string(o.stdout) != "out\n" || string(o.stderr) != "err\n" || o.res.ExitCode != 3 || o.res.Cwd != dir || o.res.ShellEnded {
		t.Fatalf("stdout %q stderr %q result %+v", o.stdout, o.stderr, o.res)
	}
	if !o.exportsSeen || !bytes.Contains(o.exports, []byte("W='1'")) || o.res.Exports == 0 {
		t.Fatalf("the first command's exports: %q (seen %v, version %d)", o.exports, o.exportsSeen, o.res.Exports)
	}
	// Exports the server holds are not sent again.
	o2, err := execute(t, c, "echo again", proto.ShellExecArgs{TimeoutMS: 10000, Exports: o.res.Exports})
	if err != nil || string(o2.stdout) != "again\n" || o2.exportsSeen || o2.res.Exports != o.res.Exports {
		t.Fatalf("second command: %+v %v", o2, err)
	}
	// A server that lost them gets them again.
	o3, err := execute(t, c, "true", proto.ShellExecArgs{TimeoutMS: 10000})
	if err != nil || !o3.exportsSeen {
		t.Fatalf("exports asked again: %+v %v", o3, err)
	}
}

func TestShellExecBusyAndInterrupt(t *testing.T) {
	c := pair(t, Ops())
	if _, err := execute(t, c, "true", proto.ShellExecArgs{TimeoutMS: 10000, Init: "cd " + shellQuote(t.TempDir()) + "\n"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := "echo started; sleep 100; echo never"
	st, err := c.Open(ctx, proto.OpShellExec, proto.ShellExecArgs{TimeoutMS: 60000, Length: len(cmd)}, []byte(cmd))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	first, err := st.Next() // the command runs
	if err != nil || !bytes.Contains(first, []byte("started")) {
		t.Fatalf("first output %q %v", first, err)
	}
	if _, err := execute(t, c, "echo second", proto.ShellExecArgs{TimeoutMS: 10000}); errs.CodeOf(err) != errs.Busy {
		t.Fatalf("a second command while one runs: %v, want busy", err)
	}
	cancel()
	for {
		if _, err := st.Next(); err != nil {
			break
		}
	}
	var res proto.ShellExecResult
	if err := st.Result(&res); err != nil || !res.Interrupted || res.ShellEnded {
		t.Fatalf("interrupted command: %+v %v", res, err)
	}
}

// The connection's shell ends (exit): the runner reports it and hangs up,
// which in a jail ends the runner and the jail.
func TestShellEndEndsTheConnection(t *testing.T) {
	c := pair(t, Ops())
	o, err := execute(t, c, "echo bye; exit 7", proto.ShellExecArgs{TimeoutMS: 10000, Init: "cd " + shellQuote(t.TempDir()) + "\n"})
	if err != nil || o.res.ExitCode != 7 || !o.res.ShellEnded || string(o.stdout) != "bye\n" {
		t.Fatalf("exit 7: %+v %v", o, err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the runner keeps the connection after its shell ended")
	}
	_, err = execute(t, c, "echo more", proto.ShellExecArgs{TimeoutMS: 10000})
	if errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("a command after the shell ended: %v", err)
	}
}

func TestShellExecRefusesBadCommands(t *testing.T) {
	c := pair(t, Ops())
	for _, cmd := range []string{"", "  \n", "echo a\x00b"} {
		_, err := execute(t, c, cmd, proto.ShellExecArgs{TimeoutMS: 1000, Init: ":\n"})
		if errs.CodeOf(err) != errs.Invalid {
			t.Errorf("%q: %v, want invalid", cmd, err)
		}
	}
}

func TestMayStartJobs(t *testing.T) {
	for cmd, want := range map[string]bool{
		"echo hi": false, "sleep 1 &": true, "a && b": true, ". ./env": true, "x; . f": true,
		"cat a.b": false, "eval x": true, "source f": true, "ls ./x": false, "echo .": false,
	} {
		if got := MayStartJobs(cmd); got != want {
			t.Errorf("MayStartJobs(%q) = %v, want %v", cmd, got, want)
		}
	}
}

// A command that arrives shorter than the server sent it (its input ended
// early) is never run: a cut `rm -rf build/x` must not become `rm -rf b`.
func TestShellExecRunsOnlyWholeCommands(t *testing.T) {
	c := pair(t, Ops())
	dir := t.TempDir()
	cmd := "touch " + shellQuote(dir+"/ran")
	err := c.Call(context.Background(), proto.OpShellExec, proto.ShellExecArgs{TimeoutMS: 10000, Init: ":\n", Length: len(cmd) + 5}, []byte(cmd), nil)
	if errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("a cut command: %v, want invalid", err)
	}
	if o, err := execute(t, c, "test -e "+shellQuote(dir+"/ran")+" && echo ran || echo not", proto.ShellExecArgs{TimeoutMS: 10000, Init: ":\n"}); err != nil || string(o.stdout) != "not\n" {
		t.Fatalf("the cut command ran: %q %v", o.stdout, err)
	}
}

// A connection that ends takes its shell with it, and everything its
// commands left running: a runner on a network outlives its connections,
// and the next server must not find (or pay for) a shell it did not start.
func TestConnectionEndKillsItsShellAndJobs(t *testing.T) {
	a, b := net.Pipe()
	served := make(chan struct{})
	go func() { _ = NewServer(Ops()).Serve(b); b.Close(); close(served) }()
	c := client.New(a)
	o, err := execute(t, c, "sleep 1000 >/dev/null 2>&1 & echo $! $$", proto.ShellExecArgs{TimeoutMS: 10000, Init: "cd " + shellQuote(t.TempDir()) + "\n"})
	if err != nil {
		t.Fatal(err)
	}
	var job, shell int
	if _, err := fmt.Sscan(string(o.stdout), &job, &shell); err != nil || job <= 0 || shell <= 0 {
		t.Fatalf("pids %q: %v", o.stdout, err)
	}
	c.Close()
	<-served
	for _, pid := range []int{job, shell} {
		deadline := time.Now().Add(10 * time.Second)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("process %d outlived the connection", pid)
		}
	}
}

// alive reports whether pid runs (not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}
