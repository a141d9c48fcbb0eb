package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleLoginThroughTheLinkAndTheForm: the printed link signs a
// browser in once, never reaches the logs and leaves the address bar; a
// second browser with the same link is refused and signs in with a
// pasted token; signing out ends the session on the server.
func TestConsoleLoginThroughTheLinkAndTheForm(t *testing.T) {
	needJail(t)
	srv := startConsole(t, jailDir(t), "127.0.0.1:0")
	code := srv.link[strings.Index(srv.link, "#code=")+len("#code="):]
	if len(code) < 40 || srv.token == "" {
		t.Fatalf("link %q, token %q: want a one-time code in the link and the first token", srv.link, srv.token)
	}

	b := signedIn(t, srv)
	var href string
	b.eval(`location.href`, &href)
	if strings.Contains(href, code) {
		t.Fatalf("the code is still in the address bar: %s", href)
	}
	if !strings.Contains(b.text("p.empty"), "No sessions yet") {
		t.Fatalf("a fresh server's sessions page: %q", b.text("main"))
	}
	// First paint and the sessions list, as the browser measured them.
	var perf struct {
		FirstPaint, Listed, Bytes float64
	}
	b.pageJSON(`(() => {
		const paint = performance.getEntriesByName("first-contentful-paint")[0];
		const listed = performance.getEntriesByName("sessions-listed")[0];
		const bytes = [performance.getEntriesByType("navigation")[0], ...performance.getEntriesByType("resource")]
			.filter((e) => !e.name.endsWith("/mcp") && !e.name.includes("/console/")).reduce((n, e) => n + e.encodedBodySize, 0);
		return { FirstPaint: paint ? paint.startTime : -1, Listed: listed ? listed.startTime : -1, Bytes: bytes };
	})()`, &perf)
	numbers(t, "first contentful paint %.0f ms, sessions listed %.0f ms, first load %.1f KB gzipped", perf.FirstPaint, perf.Listed, perf.Bytes/1024)

	// The same link in another browser: already used; the form takes a token.
	other := newBrowser(t)
	other.run("open the used link", chromedp.Navigate(srv.link))
	other.waitJS("the sign-in form", `!!document.querySelector("form.login")`)
	if reason := other.text("form.login .reason"); !strings.Contains(reason, "already used") {
		t.Fatalf("the used link: %q", reason)
	}
	other.screenshots("login")
	other.run("paste the token", chromedp.SendKeys("#token", srv.token), chromedp.Click(`form.login button[type="submit"]`))
	other.waitJS("the sessions list after the form", `document.body.dataset.sessionsLoaded !== undefined`)

	// Signing out ends the session: a reload shows the form again.
	other.run("sign out", chromedp.Click(`header button`))
	other.waitJS("the form after signing out", `!!document.querySelector("form.login")`)
	other.run("reload", chromedp.Reload())
	other.waitJS("the form after a reload", `!!document.querySelector("form.login")`)

	for _, secret := range []string{code, srv.token} {
		if strings.Contains(srv.stderr.String(), secret) {
			t.Fatalf("a login secret is in the server's logs")
		}
	}
}

// TestConsoleRevokedTokenSignsOut: revoking the token a console signed in
// with signs it out, in words.
func TestConsoleRevokedTokenSignsOut(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	srv := startConsole(t, data, "127.0.0.1:0")
	tok := createToken(t, data, "dora")
	b := newBrowser(t)
	b.run("open the console", chromedp.Navigate(srv.base+"/"))
	b.waitJS("the sign-in form", `!!document.querySelector("form.login")`)
	b.run("paste the token", chromedp.SendKeys("#token", tok), chromedp.Click(`form.login button[type="submit"]`))
	b.waitJS("the sessions list", `document.body.dataset.sessionsLoaded !== undefined`)
	if out, err := exec.Command(warrenBin, "token", "revoke", tok[:10], "--data-dir", data).CombinedOutput(); err != nil {
		t.Fatalf("token revoke: %v %s", err, out)
	}
	// The server trusts a checked token for a few seconds: refresh until
	// the page says it is signed out.
	b.waitJS("the signed-out form", `(() => {
		if (document.querySelector("form.login")) return true;
		const r = [...document.querySelectorAll("main button")].find((x) => x.textContent === "Refresh");
		if (r && !(Date.now() - (window.lastClick || 0) < 1000)) { window.lastClick = Date.now(); r.click(); }
		return false;
	})()`)
	if reason := b.text("form.login .reason"); !strings.Contains(reason, "revoked") {
		t.Fatalf("after the revocation the page says %q", reason)
	}
	if s := b.text(".status"); s != "Not signed in" {
		t.Fatalf("status %q", s)
	}
}
