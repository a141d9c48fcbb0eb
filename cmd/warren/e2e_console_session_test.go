package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// gitRepo makes a local repository with a README and a sub directory.
func gitRepo(t *testing.T) string {
	t.Helper()
	repo := jailDir(t)
	if err := os.MkdirAll(filepath.Join(repo, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(repo, "README.md"), []byte("# demo\n\nfirst line\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "sub", "notes.txt"), []byte("notes\n"), 0o644)
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "."},
		{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	// Over HTTP warren works only in directories that belong to a user,
	// not root: the repository is a user's, as it would be.
	err := filepath.Walk(repo, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 1000, 1000)
	})
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// shellRun types a command into the shell view and waits for its exit
// line; it returns the shell's whole text.
func shellRun(b *browser, command string) string {
	b.t.Helper()
	var before int
	b.eval(`document.querySelectorAll("#shell-output .exit").length`, &before)
	b.run("type "+command, chromedp.SendKeys("#shell-input", command+kb.Enter))
	b.waitJS("the end of "+command, `document.querySelectorAll("#shell-output .exit").length > `+strconv.Itoa(before))
	return b.text("#shell-output")
}

// TestConsoleSessionShellFilesAndDiff: a person creates a session from a
// local git repository, uses the shell (state kept between commands, slow
// output streaming line by line, Ctrl-C, hostile output shown as text),
// edits a file and sees the change in the diff.
func TestConsoleSessionShellFilesAndDiff(t *testing.T) {
	needJail(t)
	repo := gitRepo(t)
	srv := startConsole(t, jailDir(t), "127.0.0.1:0", "--allow-local-sources")
	b := signedIn(t, srv)
	b.screenshots("sessions-empty")

	b.run("create a session from the repository",
		chromedp.SendKeys("#new-source", repo),
		chromedp.SetValue("#new-mode", "clone"),
		chromedp.SendKeys("#new-name", "demo"),
		chromedp.Click(`form.create button[type="submit"]`),
	)
	b.waitJS("the shell of the new session", `!!document.querySelector("#shell-input")`)

	shellRun(b, "cd sub; export A=1")
	if out := shellRun(b, "pwd; echo $A"); !strings.Contains(out, "/workspace/sub\n1\n") {
		t.Fatalf("cd and export did not persist:\n%s", out)
	}
	if p := b.text("#shell-prompt"); !strings.Contains(p, "/workspace/sub") {
		t.Fatalf("the prompt does not show the cwd: %q", p)
	}

	// A slow command: its first line is on the page while it still runs.
	b.run("start a slow command", chromedp.SendKeys("#shell-input", "for i in 1 2 3 4 5; do echo line $i; sleep 0.4; done"+kb.Enter))
	b.waitJS("the first line", `document.querySelector("#shell-output").textContent.includes("line 1")`)
	var early string
	b.eval(`document.querySelector("#shell-output").textContent`, &early)
	if strings.Contains(early, "line 5") {
		t.Fatal("all five lines arrived at once: the output did not stream")
	}
	b.waitJS("the slow command's end", `document.querySelector("#shell-output").textContent.includes("line 5") && document.querySelector("#shell-state").textContent === "ready"`)

	// Ctrl-C stops a sleep 30 and the shell lives on.
	start := time.Now()
	b.run("start sleep 30", chromedp.SendKeys("#shell-input", "sleep 30"+kb.Enter))
	b.waitJS("sleep 30 running", `document.querySelector("#shell-state").textContent === "running…"`)
	b.run("press Ctrl-C", chromedp.Focus("#shell-input"), chromedp.KeyEvent("c", chromedp.KeyModifiers(input.ModifierCtrl)))
	b.waitJS("the interrupted exit", `document.querySelector("#shell-output").textContent.includes("[interrupted")`)
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("Ctrl-C took %v", d)
	}
	if out := shellRun(b, "echo still $A"); !strings.Contains(out, "still 1") {
		t.Fatalf("the shell lost its state after Ctrl-C:\n%s", out)
	}

	// Output that looks like markup, with colours: text, never HTML.
	out := shellRun(b, `printf '\033[31mred\033[0m <script>window.pwned=1</script><img src=x onerror="window.pwned=2"> \033]0;title\007done\n'`)
	if !strings.Contains(out, `<script>window.pwned=1</script><img src=x onerror="window.pwned=2"> done`) {
		t.Fatalf("hostile output not shown as text:\n%s", out)
	}
	var hostile struct {
		Elements int
		Pwned    bool
		Red      bool
	}
	b.pageJSON(`({
		Elements: document.querySelectorAll("#shell-output script, #shell-output img").length,
		Pwned: window.pwned !== undefined,
		Red: [...document.querySelectorAll("#shell-output .fg1")].some((e) => e.textContent === "red"),
	})`, &hostile)
	if hostile.Elements != 0 || hostile.Pwned || !hostile.Red {
		t.Fatalf("hostile output: %+v (want no elements, nothing run, 'red' in red)", hostile)
	}
	b.screenshots("shell")

	// Open, edit and save a file; the diff shows it.
	var hash string
	b.eval(`location.hash`, &hash)
	base := strings.TrimSuffix(hash, "/shell")
	b.run("open the files", chromedp.Navigate(srv.base+"/"+base+"/files"))
	b.waitJS("the file tree", `!!document.querySelector('button[data-path="README.md"]')`)
	b.run("open README.md", chromedp.Click(`button[data-path="README.md"]`))
	b.waitJS("the editor", `!!document.querySelector("#editor")`)
	b.run("edit and save",
		chromedp.Evaluate(`document.querySelector("#editor").value += "added from the console\n"`, nil),
		chromedp.Click("#save"),
	)
	b.waitJS("saved", `document.querySelector(".viewer").textContent.includes("Saved.")`)
	b.screenshots("files")
	b.run("open the diff", chromedp.Navigate(srv.base+"/"+base+"/diff"))
	b.waitJS("the diff", `[...document.querySelectorAll(".diff .add")].some((e) => e.textContent.includes("added from the console"))`)
	if s := b.text(".diffs .summary"); !strings.Contains(s, "1 file changed") {
		t.Fatalf("diff summary %q", s)
	}
	b.screenshots("diff")

	// A picture made in the shell: read_file returns it as an image, and
	// the files page says what it is and offers no editor, whose Save would
	// replace it with nothing.
	b.run("back to the shell", chromedp.Navigate(srv.base+"/"+base+"/shell"))
	b.waitJS("the shell", `!!document.querySelector("#shell-input")`)
	if out := shellRun(b, printfBytes(chart(t, "png"), "/workspace/chart.png")+" && echo made-chart"); !strings.Contains(out, "made-chart") {
		t.Fatalf("chart.png not made:\n%s", out)
	}
	b.run("the files again", chromedp.Navigate(srv.base+"/"+base+"/files"))
	b.waitJS("chart.png in the tree", `!!document.querySelector('button[data-path="chart.png"]')`)
	b.run("open chart.png", chromedp.Click(`button[data-path="chart.png"]`))
	b.waitJS("the picture's facts", `document.querySelector(".viewer").textContent.includes("image/png")`)
	var editors int
	b.eval(`document.querySelectorAll("#editor, #save").length`, &editors)
	if editors != 0 {
		t.Fatal("an image opened in an editor")
	}

	b.run("back to the sessions", chromedp.Navigate(srv.base+"/#/"))
	b.waitJS("the session in the list", `!!document.querySelector("tr[data-session]")`)
	b.screenshots("sessions")
	// On a phone's width the table becomes cards, nothing scrolls sideways.
	b.run("a phone's width", chromedp.EmulateViewport(390, 844))
	var overflow bool
	b.eval(`document.documentElement.scrollWidth > document.documentElement.clientWidth`, &overflow)
	if overflow {
		t.Fatal("the sessions page scrolls sideways on a phone")
	}
	// (Its screenshots at a phone's width: TestConsoleAxeAndPhoneWidth.)
}
