package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixtureWorkspace is where the release that wrote testdata/release-2026-11
// kept its task board: the board is keyed by that absolute path.
const fixtureWorkspace = "/tmp/warren-upgrade-fixture/ws"

// A database written by the release before the one migration mechanism
// (testdata/release-2026-11/warren.db, made by warren at 61911c8 with the
// CLI and an MCP client: a token, two tasks with a claim and a note, a
// bound default session with a saved cwd and export, an empty session,
// usage) is upgraded in place, and everything in it is still there.
func TestUpgradeFromTheNovember2026Release(t *testing.T) {
	src := filepath.Join("testdata", "release-2026-11")
	data := t.TempDir()
	copyFile(t, filepath.Join(src, "warren.db"), filepath.Join(data, "warren.db"))
	if err := os.MkdirAll(filepath.Join(fixtureWorkspace, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(fixtureWorkspace)) })
	copyFile(t, filepath.Join(src, "TASKS.md"), filepath.Join(fixtureWorkspace, "docs", "TASKS.md"))

	ls := warren(t, "session", "ls", "--data-dir", data)
	for _, want := range []string{"legacy", "default", "/workspace/sub"} {
		if !strings.Contains(ls, want) {
			t.Errorf("session ls after the upgrade lacks %q:\n%s", want, ls)
		}
	}
	var board struct {
		Tasks []struct {
			ID    string `json:"id"`
			Notes []struct {
				Text string `json:"text"`
			} `json:"notes"`
		} `json:"tasks"`
	}
	out := warren(t, "task", "ls", "--json", "--data-dir", data, "--workspace", fixtureWorkspace)
	if err := json.Unmarshal([]byte(out), &board); err != nil {
		t.Fatalf("task ls --json: %v\n%s", err, out)
	}
	if len(board.Tasks) != 2 || len(board.Tasks[0].Notes) != 1 || board.Tasks[0].Notes[0].Text != "a note from the old release" {
		t.Errorf("tasks after the upgrade: %s", out)
	}
	if rep := warren(t, "usage", "report", "--data-dir", data, "--group-by", "model"); !strings.Contains(rep, "1000") {
		t.Errorf("usage after the upgrade lacks the 1000 input tokens:\n%s", rep)
	}
	// The old token still signs in, and the old default session answers
	// with its saved cwd and exports.
	tok, err := os.ReadFile(filepath.Join(src, "bob.token"))
	if err != nil {
		t.Fatal(err)
	}
	needJail(t)
	srv := serveHTTP(t, "--data-dir", data)
	c := connectHTTP(t, srv, strings.TrimSpace(string(tok)))
	c.ok("session_list", nil)
	// A second open of the upgraded database is a no-op.
	warren(t, "session", "ls", "--data-dir", data)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
