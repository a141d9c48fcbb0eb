package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// session_create on a full disk says the disk is full and what to do, in
// every way a workspace is made (empty, a clone of a repository, a bound
// directory), and never shows the server's paths: the data directory,
// the workspace, the source.
func TestSessionCreateOnAFullDiskHidesPaths(t *testing.T) {
	needJail(t)
	mnt := smallDisk(t, "8m")
	data := filepath.Join(mnt, "data")
	// Sources on another disk, with enough in them that a clone or a copy
	// needs room.
	src := jailDir(t)
	repo := filepath.Join(src, "repo")
	dir := filepath.Join(src, "dir")
	for _, d := range []string{repo, dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"a.txt", "b.txt"} {
			if err := os.WriteFile(filepath.Join(d, n), []byte(strings.Repeat(n, 1<<16)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	c := serveStdio(t, "--data-dir", data)
	before := c.ok("session_create", map[string]any{"name": "before"})["session_id"].(string)
	c.exec("head -c 100000 /dev/zero > big", "session_id", before)

	fillDisk(t, mnt)

	for _, args := range []map[string]any{
		{"name": "empty"},
		{"name": "clone", "source": repo},
		{"name": "clone-url", "source": "file://" + repo},
		{"name": "bind", "source": dir},
	} {
		res := c.call("session_create", args)
		text := textOf(res)
		if !res.IsError {
			t.Errorf("session_create %v on a full disk succeeded: %s", args, text)
			continue
		}
		t.Logf("session_create %v: %s", args, text)
		if !strings.Contains(text, "disk") || !strings.Contains(text, "full") || !strings.Contains(text, "free space") {
			t.Errorf("session_create %v: %q does not say the disk is full and to free space", args, text)
		}
		// The source the caller gave may be named; nothing else of the server.
		shown := text
		if s, ok := args["source"].(string); ok {
			shown = strings.ReplaceAll(shown, s, "<source>")
		}
		for _, p := range []string{mnt, src, "/tmp", "/workspaces/", "/audit/", "/homes/"} {
			if strings.Contains(shown, p) {
				t.Errorf("session_create %v: %q shows the server path %q", args, text, p)
			}
		}
	}
}
