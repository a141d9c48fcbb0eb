package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestShellDropsEscapesThatActOutsideTheScreen plays a jail that tries to
// reach the host through the terminal of the person running `warren shell`:
// OSC 52 (write the host clipboard), the same inside a tmux DCS passthrough
// (tmux's paste buffer), a window-title report and a directory whose name is
// an escape (the prompt prints the jail's cwd). None of it may reach the
// host's stdout or stderr; colours still do.
func TestShellDropsEscapesThatActOutsideTheScreen(t *testing.T) {
	needJail(t)
	cmd := exec.Command(warrenBin, "shell", "--workspace", jailDir(t))
	cmd.Stdin = strings.NewReader(strings.Join([]string{
		`printf 'osc52:\033]52;c;aGFjaw==\a:end\n'`,
		`printf 'tmux:\033Ptmux;\033\033]52;c;aGFjaw==\a\033\\:end\n'`,
		`printf 'err:\033]52;c;aGFjaw==\033\\:end\n' >&2`,
		`printf 'report:\033[21t\033[6n:end\n'`,
		`printf 'c1:\302\233\061m\302\235\065\062;c;aGFjaw==\a:end\n'`,
		`printf 'colour:\033[1;31mred\033[0m:end\n'`,
		`mkdir "$(printf 'd\033]52;c;aGFjaw==\a')" && cd d*`,
		`echo done`,
	}, "\n") + "\n")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("warren shell: %v\nstderr %q", err, stderr.String())
	}
	out, errOut := stdout.String(), stderr.String()
	if !strings.Contains(out, "done") {
		t.Fatalf("the script did not run to its end: %q", out)
	}
	for _, s := range []string{out, errOut} {
		for _, bad := range []string{"\x1b]", "\x1bP", "aGFjaw", "\x1b[21t", "\x1b[6n", "\u009b", "\u009d", "\a"} {
			if strings.Contains(s, bad) {
				t.Errorf("%q reached the host terminal: %q", bad, s)
			}
		}
	}
	for _, want := range []string{"osc52::end\n", "tmux::end\n", "report::end\n", "colour:\x1b[1;31mred\x1b[0m:end\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q: %q", want, out)
		}
	}
	if !strings.Contains(errOut, "err::end\n") {
		t.Errorf("stderr lacks the filtered line: %q", errOut)
	}
	if !strings.Contains(out, "warren:/workspace/d$ ") {
		t.Errorf("the prompt should show the cwd without its escape: %q", out)
	}
}
