package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	pt "github.com/warrenhq/warren/agent/provider/providertest"
)

// A person at a terminal: the answer streams in while the model is still
// writing it, Ctrl-C stops a turn and the chat answers the next prompt,
// prompts are kept in a 0600 history, and Ctrl-D leaves.
func TestChatOnATerminal(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	first, stuck := make(chan struct{}), make(chan struct{})
	defer close(stuck)
	model := pt.New(pt.OpenAI,
		pt.Reply{Text: "streamed-one streamed-two streamed-end", Hold: first},
		pt.Reply{Text: "never shown in full: NEVER-SHOWN", Hold: stuck},
		pt.Reply{Text: "third answer arrives"},
	)
	defer model.Close()

	master, slave := openPTY(t)
	cmd := exec.Command(warrenBin, "chat", "--data-dir", data, "--model", "gpt-4.1-mini", "--base-url", model.BaseURL())
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=sk-test-key-never-logged", "TERM=xterm")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// Its own session with the pty as controlling terminal: Ctrl-C typed
	// on it is a SIGINT to warren, as in a real terminal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var screen lockedBuffer
	go func() { _, _ = bufio.NewReader(master).WriteTo(&screen) }()
	shows := func(what string) func() bool { return func() bool { return strings.Contains(screen.String(), what) } }
	// promptAfter: the REPL asks for the next line after what: typing
	// before that would go to a terminal in cooked mode, not to the editor.
	promptAfter := func(what string) func() bool {
		return func() bool {
			_, rest, ok := strings.Cut(screen.String(), what)
			return ok && strings.Contains(rest, "›")
		}
	}
	type_ := func(s string) {
		if _, err := master.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}

	waitFor(t, "the greeting", 30*time.Second, promptAfter("/help for commands"))
	type_("first question\r")
	// The model holds its last delta: what is on screen arrived as it was sent.
	waitFor(t, "the first deltas", 20*time.Second, shows("streamed-one"))
	if strings.Contains(screen.String(), "streamed-end") {
		t.Fatal("the last delta is on screen before the model sent it")
	}
	close(first)
	waitFor(t, "the end of the first answer", 20*time.Second, shows("streamed-end"))
	waitFor(t, "the prompt after the first answer", 20*time.Second, promptAfter("streamed-end"))

	type_("second question\r")
	waitFor(t, "the second answer to start", 20*time.Second, shows("never shown in full"))
	type_("\x03") // Ctrl-C
	waitFor(t, "the turn to stop", 20*time.Second, promptAfter("(turn stopped)"))
	type_("third question\r") // the chat is still there to answer it
	waitFor(t, "the third answer", 20*time.Second, promptAfter("third answer arrives"))
	if strings.Contains(screen.String(), "NEVER-SHOWN") {
		t.Error("the stopped answer went on")
	}

	type_("\x04") // Ctrl-D on an empty line leaves
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("Ctrl-D: %v\n%s", err, screen.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("Ctrl-D did not leave:\n%s", screen.String())
	}

	st, err := os.Stat(filepath.Join(data, "chat_history"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("history: %v %v, want a 0600 file", st, err)
	}
	b, _ := os.ReadFile(filepath.Join(data, "chat_history"))
	if got := string(b); got != "first question\nsecond question\nthird question\n" {
		t.Errorf("history %q", got)
	}
	if strings.Contains(screen.String(), "sk-test-key") {
		t.Error("the API key was printed")
	}
}
