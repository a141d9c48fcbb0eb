// Package docs holds warren's documentation; its tests check that what
// the documentation states of the code holds.
package docs

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/warrenhq/warren"

// pkg is one package of the module as go list sees it: its own imports
// (tests' excluded) and everything it links.
type pkg struct {
	imports, deps []string
}

// graph lists the module's packages.
func graph(t *testing.T) map[string]pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \",\"}} {{join .Deps \",\"}}", module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	g := map[string]pkg{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, " ")
		if len(f) != 3 {
			t.Fatalf("go list printed %q", line)
		}
		g[strings.TrimPrefix(f[0], module+"/")] = pkg{imports: ours(f[1]), deps: ours(f[2])}
	}
	for _, p := range []string{"sessions", "mcp", "sandbox", "cmd/warren-runner", "tasks", "metering"} {
		if _, ok := g[p]; !ok {
			t.Fatalf("go list did not list %s: the test no longer checks what ARCHITECTURE.md states", p)
		}
	}
	return g
}

// ours keeps the module's packages of a comma-separated list, without the
// module's prefix, and the ones outside the standard library with it.
func ours(list string) []string {
	var out []string
	for _, p := range strings.Split(list, ",") {
		switch {
		case p == "":
		case strings.HasPrefix(p, module+"/"):
			out = append(out, strings.TrimPrefix(p, module+"/"))
		case external(p):
			out = append(out, p)
		}
	}
	return out
}

// external reports whether p is outside warren and the standard library:
// its first element is a host name.
func external(p string) bool {
	return strings.Contains(strings.SplitN(p, "/", 2)[0], ".")
}

func under(p string, roots ...string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// leaves are the packages every other may import: they import no other
// package of warren.
var leaves = []string{"sessions/errs", "sessions/bound", "sessions/sqlschema"}

// TestImportDirections checks the directions docs/ARCHITECTURE.md states;
// a change that breaks one fails here with the import that breaks it.
func TestImportDirections(t *testing.T) {
	g := graph(t)
	rules := []struct {
		what string
		// applies selects the packages the rule is about.
		applies func(p string) bool
		// deps: the rule is about everything linked, not only own imports.
		deps bool
		// allowed says whether a package may be linked or imported.
		allowed func(dep string) bool
	}{
		{"the runner (cmd/warren-runner) links only the standard library, golang.org/x/sys and sandbox/runner",
			func(p string) bool { return p == "cmd/warren-runner" }, true,
			func(d string) bool { return under(d, "sandbox/runner", "golang.org/x/sys") }},
		{"sessions/errs, sessions/bound and sessions/sqlschema import only the standard library (sqlschema/sqltest, for tests, starts PostgreSQL)",
			func(p string) bool { return slices.Contains(leaves, p) }, true,
			func(string) bool { return false }},
		{"sandbox imports no other warren package but sessions/errs and sessions/bound",
			func(p string) bool { return under(p, "sandbox") }, true,
			func(d string) bool { return external(d) || under(d, "sandbox") || under(d, leaves...) }},
		{"metering, mcp/tokens and mcp/oauth import no other domain package (and never sessions)",
			func(p string) bool { return under(p, "metering", "mcp/tokens", "mcp/oauth") }, true,
			func(d string) bool { return external(d) || under(d, leaves...) }},
		{"tasks imports no other domain package (and never sessions or sandbox's jails): it speaks the runner protocol (sandbox/runner/proto, sandbox/runner/client) to a runner it is handed, for a board in a workspace",
			func(p string) bool { return under(p, "tasks") }, true,
			func(d string) bool {
				return external(d) || under(d, leaves...) || under(d, "sandbox/runner/proto", "sandbox/runner/client")
			}},
		{"sessions does not import mcp, agent, tasks, metering, web or cmd: they use it",
			func(p string) bool { return p == "sessions" || under(p, "sessions/workspace") }, true,
			func(d string) bool { return !under(d, "mcp", "agent", "tasks", "metering", "web", "cmd") }},
		{"mcp does not import sandbox: commands run through sessions.Manager (Exec, Wait, Kill), which owns a command's life",
			func(p string) bool { return under(p, "mcp") }, false,
			func(d string) bool { return !under(d, "sandbox") }},
		{"only cmd/warren and the console (web, which goes through MCP) import mcp",
			func(p string) bool { return !under(p, "mcp", "cmd/warren", "web") }, false,
			func(d string) bool { return !under(d, "mcp") }},
		{"agent imports no mcp, sessions, sandbox or tasks: it reaches sessions through MCP tools",
			func(p string) bool { return under(p, "agent") }, true,
			func(d string) bool {
				return !under(d, "mcp", "sandbox", "tasks") && (!under(d, "sessions") || under(d, leaves...))
			}},
		{"nothing imports a command (cmd/...) but the command itself",
			func(p string) bool { return !under(p, "cmd") }, false,
			func(d string) bool { return !under(d, "cmd") }},
	}
	for _, r := range rules {
		for p, info := range g {
			if !r.applies(p) {
				continue
			}
			list := info.imports
			if r.deps {
				list = info.deps
			}
			for _, d := range list {
				if !r.allowed(d) {
					t.Errorf("%s: %s %s %s", r.what, p, map[bool]string{true: "links", false: "imports"}[r.deps], d)
				}
			}
		}
	}
}
