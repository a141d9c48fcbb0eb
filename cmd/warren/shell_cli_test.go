package main

import (
	"bufio"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDoctorPassesOnThisMachine(t *testing.T) {
	out, err := exec.Command(warrenBin, "doctor").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "jails work on this machine") {
		t.Fatalf("warren doctor: %v\n%s", err, out)
	}
}

// TestShellCtrlCInterruptsCommandNotSession drives `warren shell` as a
// person would: type commands, press Ctrl-C during a long one, go on.
func TestShellCtrlCInterruptsCommandNotSession(t *testing.T) {
	cmd := exec.Command(warrenBin, "shell", "--workspace", jailDir(t))
	stdin, _ := cmd.StdinPipe()
	stdoutR, stdoutW := io.Pipe()
	cmd.Stdout = stdoutW
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	out := bufio.NewReader(stdoutR)
	lines := make(chan string, 100)
	go func() {
		for {
			s, err := out.ReadString('$')
			lines <- s
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	expect := func(want string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		var seen strings.Builder
		for {
			select {
			case s, ok := <-lines:
				seen.WriteString(s)
				if strings.Contains(seen.String(), want) {
					return
				}
				if !ok {
					t.Fatalf("output ended without %q: %q (stderr %q)", want, seen.String(), stderr.String())
				}
			case <-deadline:
				t.Fatalf("no %q in %q", want, seen.String())
			}
		}
	}
	expect("warren:/workspace$")
	io.WriteString(stdin, "mkdir -p a && cd a && export X=42\n")
	expect("warren:/workspace/a$")
	io.WriteString(stdin, "sleep 100\n")
	time.Sleep(time.Second) // the command is running by then
	cmd.Process.Signal(syscall.SIGINT)
	expect("warren:/workspace/a$")
	io.WriteString(stdin, "echo x=$X; false\n")
	expect("x=42")
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("warren shell exited with %v; stderr %q", err, stderr.String())
	}
	for _, want := range []string{"[interrupted]", "[exit 1]"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q: %q", want, stderr.String())
		}
	}
}
