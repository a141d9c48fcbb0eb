package main

// Helpers of the console's browser tests: a real 'warren serve http', a
// real headless Chromium (Debian's, driven with chromedp), and a person's
// view of the page (what is visible, what a click does).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// consoleServer is a running 'warren serve http' with its console.
type consoleServer struct {
	base   string // http://127.0.0.1:PORT
	link   string // the printed console link (with its one-time code)
	token  string // the token printed on the first start, if any
	data   string
	stderr *syncBuffer // the server's logs
	cmd    *exec.Cmd
	done   chan struct{}
}

// startConsole starts 'warren serve http' on addr (127.0.0.1:0 for any
// free port) and reads the console link it prints on stdout.
func startConsole(t *testing.T, data, addr string, args ...string) *consoleServer {
	t.Helper()
	cmd := exec.Command(warrenBin, append([]string{"serve", "http", "--addr", addr, "--data-dir", data}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &consoleServer{data: data, stderr: &syncBuffer{}, cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = io.MultiWriter(s.stderr, newTestLog(t, "server: "))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if f := strings.Fields(line); len(f) == 2 && f[0] == "Token:" {
				s.token = f[1]
			}
			if strings.HasPrefix(line, "Web console") {
				s.link = line[strings.LastIndex(line, " ")+1:]
				s.base = strings.SplitN(s.link, "/#", 2)[0]
				s.base = strings.TrimSuffix(s.base, "/")
				close(found)
			}
		}
	}()
	select {
	case <-found:
	case <-s.done:
		t.Fatalf("warren serve http exited: %s", s.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("warren serve http printed no console link")
	}
	return s
}

// stop interrupts the server and waits for it.
func (s *consoleServer) stop() {
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// mcpURL is the MCP endpoint, for go-sdk clients.
func (s *consoleServer) mcpURL() *httpServer { return &httpServer{url: s.base + "/mcp"} }

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// browser is one headless Chromium with a fresh profile (its own
// cookies), and what its pages reported.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	problems []string // CSP violations and uncaught exceptions
}

// newBrowser starts Chromium; dark selects the dark colour scheme.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Fatal("chromium is not installed: run 'just deps' (CI installs it; the console's tests need a real browser)")
	}
	// Chromium's helper processes can still write to the profile for a
	// moment after the browser is cancelled: remove it ourselves, retrying,
	// after the browser's cleanup below (cleanups run last first), instead
	// of t.TempDir failing the test on a "directory not empty".
	profile, err := os.MkdirTemp("", "warren-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath("chromium"),
		chromedp.NoSandbox, // the tests run as root
		chromedp.WindowSize(1200, 800),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("user-data-dir", profile),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			b.report("uncaught exception: " + e.ExceptionDetails.Error())
		case *log.EventEntryAdded:
			if strings.Contains(e.Entry.Text, "Content Security Policy") {
				b.report("CSP violation: " + e.Entry.Text)
			}
		}
	})
	if err := chromedp.Run(ctx, log.Enable(), runtime.Enable()); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, p := range b.problems {
			t.Errorf("the page reported %s", p)
		}
	})
	return b
}

func (b *browser) report(p string) {
	b.mu.Lock()
	b.problems = append(b.problems, p)
	b.mu.Unlock()
}

// run runs actions with a deadline and fails the test with what.
func (b *browser) run(what string, actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var text string
		_ = chromedp.Run(b.ctx, chromedp.Evaluate(`document.body ? document.body.innerText.slice(0, 2000) : ""`, &text))
		b.t.Fatalf("%s: %v\nthe page shows:\n%s", what, err, text)
	}
}

// waitJS waits until a JavaScript expression is true.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	var ok bool
	b.run(what, chromedp.Poll(expr, &ok, chromedp.WithPollingTimeout(40*time.Second), chromedp.WithPollingInterval(25*time.Millisecond)))
}

// eval returns the value of a JavaScript expression.
func (b *browser) eval(expr string, out any) {
	b.t.Helper()
	b.run("evaluate "+expr, chromedp.Evaluate(expr, out))
}

// text returns the visible text of the first element matching sel.
func (b *browser) text(sel string) string {
	b.t.Helper()
	var s string
	b.eval(fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel), &s)
	return s
}

// scheme switches the page between the light and dark colour schemes.
func (b *browser) scheme(dark bool) {
	b.t.Helper()
	v := "light"
	if dark {
		v = "dark"
	}
	b.run("emulate "+v, emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}}))
}

// screenshots saves the page in both themes as NAME-light.png and
// NAME-dark.png under $WARREN_SCREENSHOTS (just web-screenshots writes
// docs/console); without it nothing is written.
func (b *browser) screenshots(name string) {
	b.t.Helper()
	dir := os.Getenv("WARREN_SCREENSHOTS")
	if dir == "" {
		return
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", "..", dir) // tests run in cmd/warren
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	for _, dark := range []bool{false, true} {
		b.scheme(dark)
		var png []byte
		b.run("screenshot", chromedp.Sleep(150*time.Millisecond), chromedp.CaptureScreenshot(&png))
		theme := map[bool]string{false: "light", true: "dark"}[dark]
		if err := os.WriteFile(filepath.Join(dir, name+"-"+theme+".png"), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	b.scheme(false)
}

// signedIn opens the printed link in a fresh browser and waits for the
// sessions list.
func signedIn(t *testing.T, s *consoleServer) *browser {
	t.Helper()
	b := newBrowser(t)
	b.run("open the console link", chromedp.Navigate(s.link))
	b.waitJS("the sessions list", `document.body.dataset.sessionsLoaded !== undefined`)
	return b
}

// numbers logs a measurement for docs/console.md.
func numbers(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("console-numbers: "+format, args...)
}

// pageJSON reads a JSON value the page computes.
func (b *browser) pageJSON(expr string, out any) {
	b.t.Helper()
	var s string
	b.eval(`JSON.stringify(`+expr+`)`, &s)
	if err := json.Unmarshal([]byte(s), out); err != nil {
		b.t.Fatalf("%s: %v (%s)", expr, err, s)
	}
}

// get fetches a console path with the Go client (no browser).
func get(t *testing.T, url string) *http.Response {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
