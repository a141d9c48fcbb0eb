package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns the two ends of a new pseudo-terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty slave: %v", err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// lockedBuffer collects what a reader goroutine reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls until cond holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A person who runs `warren serve stdio` (what `just serve` does) in a
// terminal is told what this is and how to connect a client, and the logs
// are readable lines, not JSON.
func TestServeStdioOnATerminalExplainsItself(t *testing.T) {
	master, slave := openPTY(t)
	cmd := exec.Command(warrenBin, "serve", "stdio", "--data-dir", t.TempDir())
	cmd.Stdin, cmd.Stderr = slave, slave
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var screen lockedBuffer
	go func() { _, _ = bufio.NewReader(master).WriteTo(&screen) }()
	waitFor(t, "the terminal hint", 20*time.Second, func() bool { return strings.Contains(screen.String(), "Press Ctrl-D") })
	got := screen.String()
	for _, want := range []string{"MCP server on stdio", "Claude Desktop", "shell --workspace", "serve http"} {
		if !strings.Contains(got, want) {
			t.Errorf("the terminal shows no %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, `{"level"`) {
		t.Errorf("logs on a terminal are JSON:\n%s", got)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout carries more than JSON-RPC: %q", stdout.String())
	}
}

// Piped (as every MCP client runs it), the server says nothing of the sort
// and logs JSON lines.
func TestServeStdioPipedLogsJSON(t *testing.T) {
	cmd := exec.Command(warrenBin, "serve", "stdio", "--data-dir", t.TempDir())
	cmd.Stdin = strings.NewReader("")
	out, _ := cmd.CombinedOutput()
	if strings.Contains(string(out), "Press Ctrl-D") {
		t.Fatalf("a piped server printed the terminal hint:\n%s", out)
	}
	if !strings.Contains(string(out), `{"level":"info"`) {
		t.Fatalf("piped logs are not JSON:\n%s", out)
	}
}

// A second start of serve http, when a token exists, still says where it
// listens and how to make a token; a bad log level is refused.
func TestServeHTTPSaysHowToConnect(t *testing.T) {
	data := t.TempDir()
	createToken(t, data, "alice")
	cmd := exec.Command(warrenBin, "serve", "http", "--addr", "127.0.0.1:0", "--data-dir", data)
	var out lockedBuffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitFor(t, "the URL on stdout", 20*time.Second, func() bool { return strings.Contains(out.String(), "token create --user") })
	if !strings.Contains(out.String(), "http://127.0.0.1:") {
		t.Fatalf("stdout does not give the URL:\n%s", out.String())
	}
	if msg := warrenFails(t, "serve", "stdio", "--log-level", "loud", "--data-dir", data); !strings.Contains(msg, "want debug, info, warn or error") {
		t.Fatalf("bad --log-level: %s", msg)
	}
}

// Ctrl-C at `warren shell` stops the running command, and only it: the
// terminal sends SIGINT to its whole foreground process group, which must
// not include the jail (a new shell would start and lose background jobs).
func TestShellCtrlCStopsOnlyTheCommand(t *testing.T) {
	needJail(t)
	master, slave := openPTY(t)
	cmd := exec.Command(warrenBin, "shell", "--workspace", jailDir(t))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var screen lockedBuffer
	go func() { _, _ = bufio.NewReader(master).WriteTo(&screen) }()
	waitFor(t, "the prompt", 20*time.Second, func() bool { return strings.Contains(screen.String(), "$ ") })
	io.WriteString(master, "export KEEP=kept; sleep 300 & echo bg=$!\n")
	waitFor(t, "the background job", 10*time.Second, func() bool { return strings.Count(screen.String(), "$ ") >= 2 })
	io.WriteString(master, "sleep 10\n")
	time.Sleep(500 * time.Millisecond) // the command is running
	io.WriteString(master, "\x03")
	waitFor(t, "the interrupted command", 10*time.Second, func() bool { return strings.Contains(screen.String(), "[interrupted]") })
	io.WriteString(master, "echo still-$KEEP; jobs -p | wc -l\n")
	waitFor(t, "the next command", 10*time.Second, func() bool { return strings.Contains(screen.String(), "still-kept") })
	if strings.Contains(screen.String(), "a new one started") {
		t.Fatalf("Ctrl-C restarted the whole shell:\n%s", screen.String())
	}
}
