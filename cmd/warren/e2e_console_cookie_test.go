package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chromedp/chromedp"
)

// replay adds a stolen cookie and a forged Origin to every request, as a
// local service that received the console's cookie would replay it from
// its own server.
type replay struct {
	cookie, origin, key string
	base                http.RoundTripper
}

func (r replay) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Cookie", r.cookie)
	req.Header.Set("Origin", r.origin)
	if r.key != "" {
		req.Header.Set("Warren-Console-Key", r.key)
	}
	return r.base.RoundTrip(req)
}

// replayConnect opens an MCP session at srv with a replayed cookie (and
// key, when the test pretends it leaked too).
func replayConnect(ctx context.Context, srv *consoleServer, cookie, key string) (*sdk.ClientSession, error) {
	c := sdk.NewClient(&sdk.Implementation{Name: "replay", Version: "1"}, nil)
	return c.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint:   srv.base + "/mcp",
		HTTPClient: &http.Client{Transport: replay{cookie: cookie, origin: srv.base, key: key, base: http.DefaultTransport}},
		MaxRetries: -1,
	}, nil)
}

// TestConsoleCookieReplayedFromAnotherPortRunsNothing: browsers send a
// 127.0.0.1 cookie to every port of 127.0.0.1. A person signed in to the
// console visits another local web service (here a page on another port);
// Chromium hands that service the console's cookie, and the service
// replays it from its own server to /mcp with the console's Origin and
// tries to run a command. The cookie alone must be worth nothing: the
// replay is refused and no command runs, while the console in the same
// browser keeps working.
func TestConsoleCookieReplayedFromAnotherPortRunsNothing(t *testing.T) {
	needJail(t)
	srv := startConsole(t, jailDir(t), "127.0.0.1:0")
	b := signedIn(t, srv)

	var mu sync.Mutex
	var stolen string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if c := r.Header.Get("Cookie"); c != "" {
			stolen = c
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<!doctype html><title>another local service</title><p>hello</p>"))
	}))
	defer other.Close()
	b.run("visit another local service", chromedp.Navigate(other.URL+"/"))
	mu.Lock()
	cookie := stolen
	mu.Unlock()
	if !strings.Contains(cookie, "warren_console=") {
		t.Fatalf("the page on another port received cookies %q: the test needs the browser to hand it the console's cookie", cookie)
	}

	// The other service replays the cookie with a real MCP client.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := replayConnect(ctx, srv, cookie, "")
	if err == nil {
		res, callErr := cs.CallTool(ctx, &sdk.CallToolParams{Name: "shell_exec", Arguments: map[string]any{"command": "echo replayed > pwned.txt"}})
		cs.Close()
		if callErr == nil && !res.IsError {
			t.Fatalf("the replayed cookie ran shell_exec: %v", res.StructuredContent)
		}
		t.Fatalf("the replayed cookie opened an MCP session (call: %v)", callErr)
	}
	if !strings.Contains(err.Error(), "401") && !strings.Contains(err.Error(), "403") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
		t.Fatalf("the replay failed for another reason than a refusal: %v", err)
	}
	if found, _ := filepath.Glob(filepath.Join(srv.data, "workspaces", "*", "pwned.txt")); len(found) != 0 {
		t.Fatalf("the replay wrote %v", found)
	}
	agent := connectHTTP(t, srv.mcpURL(), srv.token)
	if got, _ := agent.ok("session_list", map[string]any{})["sessions"].([]any); len(got) != 0 {
		t.Fatalf("sessions after the replay: %v", got)
	}

	if !strings.Contains(srv.stderr.String(), "another local service may have received the cookie") {
		t.Error("the server's log does not tell the operator of the refused replay")
	}

	// The console in the same browser still works, in a new page load.
	b.run("back to the console", chromedp.Navigate(srv.base+"/"))
	b.waitJS("the sessions list", `document.body.dataset.sessionsLoaded !== undefined`)
	b.run("reload", chromedp.Reload())
	b.waitJS("the sessions list after a reload", `document.body.dataset.sessionsLoaded !== undefined`)

	// A second tab of the same browser shares the sign-in.
	tab, closeTab := chromedp.NewContext(b.ctx)
	tabCtx, tabDone := context.WithTimeout(tab, 45*time.Second)
	var loaded bool
	if err := chromedp.Run(tabCtx, chromedp.Navigate(srv.base+"/"),
		chromedp.Poll(`document.body.dataset.sessionsLoaded !== undefined`, &loaded, chromedp.WithPollingInterval(25*time.Millisecond))); err != nil {
		t.Fatalf("the console in a second tab: %v", err)
	}
	tabDone()
	closeTab()

	// What made the difference is the key, which the other port never saw:
	// with the key as well (as if it had leaked) the same replay gets in.
	var key string
	b.eval(`localStorage.getItem("warren-console-key") || ""`, &key)
	if len(key) < 40 || strings.Contains(cookie, key) {
		t.Fatalf("the console key in the page's storage: %q (the other port received cookies %q)", key, cookie)
	}
	cs, err = replayConnect(ctx, srv, cookie, key)
	if err != nil {
		t.Fatalf("the cookie with its key, the control: %v", err)
	}
	cs.Close()

	// Signing out ends the key on the server: cookie and key open nothing.
	b.run("sign out", chromedp.Evaluate(`[...document.querySelectorAll("header button")].find((e) => e.textContent === "Sign out").click()`, nil))
	b.waitJS("the sign-in form", `!!document.querySelector("form.login")`)
	var left string
	b.eval(`localStorage.getItem("warren-console-key") || ""`, &left)
	if left != "" {
		t.Fatal("the console key is still in the page's storage after sign-out")
	}
	if cs, err := replayConnect(ctx, srv, cookie, key); err == nil {
		cs.Close()
		t.Fatal("the cookie and key still open an MCP session after sign-out")
	}
	if strings.Contains(srv.stderr.String(), key) {
		t.Error("the console key is in the server's log")
	}
}
