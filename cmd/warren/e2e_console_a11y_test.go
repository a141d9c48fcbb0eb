package main

// Accessibility and phone-width checks of every console page: axe-core
// (pinned in web/package.json, installed by 'just web-build') runs in the
// real page, in both colour schemes, at a desktop's and a phone's width.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	pt "github.com/warrenhq/warren/agent/provider/providertest"
)

// axeSource is web/node_modules/axe-core's browser build.
func axeSource(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "web", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatalf("axe-core is not installed (%v): run 'just web-build' (npm ci in web/ installs it; CI does)", err)
	}
	return string(b)
}

// axeViolation is one rule axe found broken, with where.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

func (v axeViolation) String() string {
	return fmt.Sprintf("%s (%s): %s at %s", v.ID, v.Impact, v.Help, strings.Join(v.Nodes, ", "))
}

// axe runs axe-core on the page as it is now and returns its serious and
// critical violations. The script is injected through the DevTools
// protocol: the page's CSP (script-src 'self') stays as it is.
func (b *browser) axe(src string) []axeViolation {
	b.t.Helper()
	var loaded bool
	b.eval(`typeof window.axe === "object"`, &loaded)
	if !loaded {
		b.run("inject axe-core", chromedp.Evaluate(src, nil))
	}
	var out string
	b.run("run axe-core", chromedp.Evaluate(`axe.run(document, { resultTypes: ["violations"] }).then((r) => JSON.stringify(
		r.violations.filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => ({
			id: v.id, impact: v.impact, help: v.help,
			nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ") + (n.failureSummary ? " [" + n.failureSummary.replace(/\s+/g, " ") + "]" : "")),
		}))))`, &out, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	var vs []axeViolation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		b.t.Fatalf("axe-core's answer %q: %v", out, err)
	}
	return vs
}

// consolePage is a page of the console and how to tell it has loaded.
type consolePage struct {
	name   string // also the screenshot's name
	path   string // after the origin
	loaded string // a JavaScript condition
	// then, optionally: what a person does on it (JavaScript) and the
	// condition that says it is done.
	do, done string
	// undo, optionally, puts the page back afterwards (JavaScript).
	undo string
}

// TestConsoleAxeAndPhoneWidth: on every page, in light and dark, at a
// desktop's width and at a phone's (375 px), axe-core finds no serious or
// critical violation and nothing is cut off at the right edge: the page
// does not scroll sideways, and what is wider than the screen (a table)
// scrolls inside its own box, which the keyboard can reach.
func TestConsoleAxeAndPhoneWidth(t *testing.T) {
	needJail(t)
	axeJS := axeSource(t)
	data := jailDir(t)
	model := pt.New(pt.OpenAI, pt.Reply{Text: "nothing to do"})
	defer model.Close()
	cfg := `{"agent": {"model": "gpt-4.1-mini", "base_url": "` + model.BaseURL() + `", "api_key": "sk-config-key"}}`
	if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	repo := gitRepo(t)
	srv := startConsole(t, data, "127.0.0.1:0", "--allow-local-sources")
	c := connectHTTP(t, srv.mcpURL(), srv.token)

	// The sign-in form and the empty sessions list first.
	login := newBrowser(t)
	login.run("open the console", chromedp.Navigate(srv.base+"/"))
	login.waitJS("the sign-in form", `!!document.querySelector("form.login")`)
	var all []string
	check := func(b *browser, p consolePage) {
		t.Helper()
		all = append(all, checkPage(t, b, axeJS, p)...)
	}
	check(login, consolePage{name: "login", loaded: `!!document.querySelector("form.login")`})

	b := signedIn(t, srv)
	check(b, consolePage{name: "sessions-empty", loaded: `!!document.querySelector("p.empty")`})

	// A session with something on every page: calls, a changed file,
	// tasks with a claim and a note, usage.
	created := c.ok("session_create", map[string]any{"source": repo, "mode": "clone", "name": "demo"})
	session := created["session_id"].(string)
	c.ok("shell_exec", map[string]any{"session_id": session, "command": "echo hello; echo changed >> README.md"})
	c.ok("task_add", map[string]any{"title": "write the release notes"})
	c.ok("task_add", map[string]any{"title": "fix the flaky test"})
	c.ok("task_claim", map[string]any{"task_id": "T-1", "session_id": session})
	c.ok("task_update", map[string]any{"task_id": "T-1", "note": "half way", "session_id": session})
	c.ok("usage_record", map[string]any{"model": "gpt-4o", "input_tokens": 120000, "output_tokens": 30000, "session_id": session})
	c.ok("usage_record", map[string]any{"model": "mystery-model-9", "input_tokens": 5000, "output_tokens": 800, "session_id": session})

	s := "/#/s/" + session
	for _, p := range []consolePage{
		{name: "shell", path: s + "/shell", loaded: `!!document.querySelector("#shell-input")`},
		// (Not first: the empty list is on screen, and opening "/#/" again keeps it.)
		{name: "sessions", path: "/#/", loaded: `!!document.querySelector("tr[data-session]")`},
		{name: "delete-dialog", loaded: `!!document.querySelector("tr[data-session]")`,
			do: `document.querySelector('button[aria-label^="delete session"]').click()`, done: `!!document.querySelector("dialog[open]")`,
			undo: `[...document.querySelectorAll("dialog[open] button")].find((b) => b.textContent === "Cancel").click()`},
		{name: "files", path: s + "/files", loaded: `!!document.querySelector('button[data-path="README.md"]')`,
			do: `document.querySelector('button[data-path="README.md"]').click()`, done: `!!document.querySelector("#editor")`},
		{name: "diff", path: s + "/diff", loaded: `!!document.querySelector(".diff .add")`},
		{name: "agent", path: s + "/agent", loaded: `!!document.querySelector("#agent-prompt")`,
			do:   `document.querySelector("#agent-prompt").value = "look around"; document.querySelector("#agent-run").click()`,
			done: `!!document.querySelector(".agent-answer")`},
		// After the Files and Diff tabs: the console's own calls, shown.
		{name: "activity", path: s + "/activity", loaded: `document.querySelectorAll(".feed li.console").length > 0`,
			do: `document.querySelector("#show-console").click()`, done: `document.querySelector(".feed li.console").offsetParent !== null`},
		{name: "tasks", path: "/#/tasks", loaded: `document.querySelectorAll("li.task").length === 2`},
		{name: "usage", path: "/#/usage", loaded: `!!document.querySelector(".usage-table table") && !!document.querySelector("svg.chart")`},
	} {
		check(b, p)
	}
	if len(all) > 0 {
		t.Fatalf("%d problems:\n%s", len(all), strings.Join(all, "\n"))
	}
}

// checkPage opens p and returns what is wrong with it in each scheme and
// width; at a phone's width it also writes the page's screenshots.
func checkPage(t *testing.T, b *browser, axeJS string, p consolePage) []string {
	t.Helper()
	if p.path != "" {
		b.run("open "+p.name, chromedp.Navigate(b.origin()+p.path))
	}
	b.waitJS(p.name, p.loaded)
	if p.do != "" {
		b.run(p.name+": "+p.do, chromedp.Evaluate(p.do, nil))
		b.waitJS(p.name+": "+p.done, p.done)
	}
	var problems []string
	for _, phone := range []bool{false, true} {
		width, height := int64(1200), int64(800)
		where := "desktop"
		if phone {
			width, height, where = 375, 740, "phone"
		}
		b.run("resize", chromedp.EmulateViewport(width, height))
		for _, dark := range []bool{false, true} {
			b.scheme(dark)
			theme := map[bool]string{false: "light", true: "dark"}[dark]
			for _, v := range b.axe(axeJS) {
				problems = append(problems, fmt.Sprintf("%s, %s, %s: %s", p.name, where, theme, v))
			}
		}
		b.scheme(false)
		if phone {
			problems = append(problems, cutOff(b, p.name)...)
			if n := signOutLines(b); n > 1 {
				problems = append(problems, fmt.Sprintf("%s, phone: \"Sign out\" wraps (%d lines, counting one below the brand's)", p.name, n))
			}
			b.screenshots(p.name + "-phone")
		}
	}
	b.run("resize", chromedp.EmulateViewport(1200, 800))
	if p.undo != "" {
		b.run(p.name+": "+p.undo, chromedp.Evaluate(p.undo, nil))
	}
	return problems
}

// cutOff lists what goes past the right edge of a phone's screen: the
// page itself scrolling sideways, or an element wider than the screen
// that is not inside a box that scrolls (and that the keyboard reaches).
func cutOff(b *browser, page string) []string {
	b.t.Helper()
	var out []string
	b.pageJSON(`(() => {
		const out = [];
		const doc = document.documentElement;
		if (doc.scrollWidth > doc.clientWidth) out.push("the page scrolls sideways: " + doc.scrollWidth + " px wide on a " + doc.clientWidth + " px screen");
		const scroller = (el) => {
			for (let p = el.parentElement; p; p = p.parentElement) {
				const o = getComputedStyle(p).overflowX;
				if ((o === "auto" || o === "scroll") && p.clientWidth < p.scrollWidth + 1 && p.getBoundingClientRect().right <= doc.clientWidth + 1) return p;
			}
			return null;
		};
		for (const el of document.querySelectorAll("main *")) {
			const r = el.getBoundingClientRect();
			if (r.width === 0 || r.right <= doc.clientWidth + 1) continue;
			const box = scroller(el);
			if (!box) { out.push("cut off: <" + el.tagName.toLowerCase() + (el.className ? "." + String(el.className).replace(/ /g, ".") : "") + "> ends at " + Math.round(r.right) + " px"); continue; }
			if (box.scrollWidth > box.clientWidth && box.tabIndex < 0 && !box.querySelector("a, button, input, select, textarea, [tabindex]"))
				out.push("a box that scrolls sideways but the keyboard cannot reach: <" + box.tagName.toLowerCase() + "." + box.className + ">");
		}
		return [...new Set(out)].slice(0, 8);
	})()`, &out)
	for i := range out {
		out[i] = page + ", phone: " + out[i]
	}
	return out
}

// signOutLines is the number of lines the header's "Sign out" takes (0
// when it is not shown), counting the line it would wrap onto below the
// brand as one more: the lines its text's boxes start on, plus one when
// it is not on the brand's line.
func signOutLines(b *browser) int {
	b.t.Helper()
	var n int
	b.eval(`(() => {
		const btn = [...document.querySelectorAll("header button")].find((x) => x.textContent === "Sign out");
		if (!btn || btn.hidden) return 0;
		const r = document.createRange();
		r.selectNodeContents(btn);
		const lines = new Set([...r.getClientRects()].map((x) => Math.round(x.top))).size;
		const brand = document.querySelector("header .brand").getBoundingClientRect();
		const box = btn.getBoundingClientRect();
		const middle = box.top + box.height / 2;
		return lines + (middle > brand.top && middle < brand.bottom ? 0 : 1);
	})()`, &n)
	return n
}

// origin is the page's scheme, host and port.
func (b *browser) origin() string {
	b.t.Helper()
	var o string
	b.eval(`location.origin`, &o)
	return o
}
