package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStdioServerPutsItsStdinBackAsItFoundIt: the stdio server reads a
// pipe or socket stdin through the runtime's poller, which needs the
// descriptor non-blocking (stdio_input.go); O_NONBLOCK is shared by every
// process holding the same open file (a shell's `< fifo`, a parent that
// keeps its copy), so the server must put blocking mode back when it is
// done, and serve as before meanwhile.
func TestStdioServerPutsItsStdinBackAsItFoundIt(t *testing.T) {
	needJail(t)
	for _, kind := range []string{"pipe", "socket", "pipe, SIGTERM", "non-blocking pipe"} {
		t.Run(kind, func(t *testing.T) {
			var ours, theirs *os.File // ours: the server's stdin, kept open here too
			switch kind {
			case "pipe", "pipe, SIGTERM":
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				ours, theirs = r, w
			case "socket":
				fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					t.Fatal(err)
				}
				ours, theirs = os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "client")
			case "non-blocking pipe":
				// Made non-blocking after os.NewFile, so that exec's Fd()
				// leaves the mode alone: the server starts with it so.
				var fds [2]int
				if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
					t.Fatal(err)
				}
				ours, theirs = os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "client")
				if err := unix.SetNonblock(fds[0], true); err != nil {
					t.Fatal(err)
				}
			}
			defer ours.Close()
			defer theirs.Close()

			cmd := exec.Command(warrenBin, "serve", "stdio", "--data-dir", jailDir(t), "--workspace", jailDir(t))
			cmd.Stdin = ours // exec hands the child this open file, in blocking mode
			cmd.Stderr = newTestLog(t, "server: ")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			out := bufio.NewReader(stdout)
			send := func(msg string) string {
				t.Helper()
				if _, err := theirs.Write([]byte(msg + "\n")); err != nil {
					t.Fatal(err)
				}
				line, err := out.ReadString('\n')
				if err != nil {
					t.Fatalf("no answer to %s: %v", msg, err)
				}
				return line
			}
			send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			if _, err := theirs.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")); err != nil {
				t.Fatal(err)
			}
			if got := send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shell_exec","arguments":{"command":"echo hi"}}}`); !strings.Contains(got, `hi\n`) {
				t.Fatalf("shell_exec echo hi: %s", got)
			}
			if !nonBlocking(t, ours) {
				t.Fatal("while serving, stdin is in blocking mode: the server reads it without the poller, and this test checks nothing")
			}

			// The client goes away (EOF on stdin), or the server is told to stop.
			switch kind {
			case "pipe", "non-blocking pipe":
				theirs.Close()
			case "pipe, SIGTERM":
				_ = cmd.Process.Signal(unix.SIGTERM)
			case "socket":
				_ = unix.Shutdown(int(theirs.Fd()), unix.SHUT_WR)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("server ended: %v", err)
				}
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("the server did not exit")
			}
			switch after := nonBlocking(t, ours); {
			case kind == "non-blocking pipe" && !after:
				t.Error("the server left a stdin it was given non-blocking in blocking mode")
			case kind != "non-blocking pipe" && after:
				t.Error("the server left its stdin non-blocking: a shell reading the same file next gets EAGAIN")
			}
		})
	}
}

// nonBlocking reports whether f's open file is in non-blocking mode,
// without changing it (f.Fd would).
func nonBlocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	var ferr error
	if err := rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil {
		t.Fatal(err)
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
	return flags&unix.O_NONBLOCK != 0
}
