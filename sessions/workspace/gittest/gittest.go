// Package gittest makes real git repositories for tests, with git itself.
package gittest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Repo makes a repository in a fresh temporary directory: two commits on
// main (README.md "version one" then "version two", gone.txt, a .gitignore
// of *.log), a tag v1 on the first and a branch "feature" adding
// feature.txt. It returns the directory and the two commits of main.
func Repo(t testing.TB) (dir, first, second string) {
	t.Helper()
	dir = t.TempDir()
	git := Git(t, dir)
	git("init", "-q", "-b", "main")
	Write(t, dir, "README.md", "version one\n")
	Write(t, dir, "gone.txt", "to be deleted\n")
	Write(t, dir, ".gitignore", "*.log\n")
	git("add", "-A")
	git("commit", "-q", "-m", "first")
	first = git("rev-parse", "HEAD")
	git("tag", "v1")
	git("branch", "feature")
	Write(t, dir, "README.md", "version two\n")
	git("commit", "-q", "-am", "second")
	second = git("rev-parse", "HEAD")
	git("checkout", "-q", "feature")
	Write(t, dir, "feature.txt", "on the branch\n")
	git("add", "-A")
	git("commit", "-q", "-m", "feature work")
	git("checkout", "-q", "main")
	return dir, first, second
}

// Git returns a function running git in dir with a fixed identity and no
// user configuration; it fails the test on error and returns the trimmed
// output.
func Git(t testing.TB, dir string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
}

// Write creates dir/name with content, and its parent directories.
func Write(t testing.TB, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
