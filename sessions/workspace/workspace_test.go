package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/sessions/workspace/gittest"
)

// operator is the policy of the host's operator: every source.
var operator = Policy{Local: true, Trusted: true}

func gitRepo(t *testing.T) (dir, first, second string) { return gittest.Repo(t) }

func write(t *testing.T, dir, name, content string) { gittest.Write(t, dir, name, content) }

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCloneByPathAndURL(t *testing.T) {
	src, _, second := gitRepo(t)
	before := read(t, filepath.Join(src, ".git", "HEAD"))
	for _, source := range []string{src, "file://" + src} {
		dir := filepath.Join(t.TempDir(), "ws")
		p, err := Prepare(context.Background(), Spec{Source: source, Dir: dir, Policy: operator})
		if err != nil {
			t.Fatalf("Prepare(%s): %v", source, err)
		}
		if p.Mode != Clone || p.Commit != second {
			t.Errorf("%s: mode %s commit %s, want clone at %s", source, p.Mode, p.Commit, second)
		}
		if got := read(t, filepath.Join(dir, "README.md")); got != "version two\n" {
			t.Errorf("%s: README = %q", source, got)
		}
	}
	if after := read(t, filepath.Join(src, ".git", "HEAD")); after != before {
		t.Errorf("the source repository changed: HEAD %q → %q", before, after)
	}
}

func TestCloneRefs(t *testing.T) {
	src, first, _ := gitRepo(t)
	cases := []struct{ ref, file, want string }{
		{"v1", "README.md", "version one\n"},
		{"feature", "feature.txt", "on the branch\n"},
		{first, "README.md", "version one\n"},
		{first[:10], "README.md", "version one\n"},
	}
	for _, c := range cases {
		dir := filepath.Join(t.TempDir(), "ws")
		var progress strings.Builder
		p, err := Prepare(context.Background(), Spec{Source: src, Ref: c.ref, Dir: dir, Progress: &progress, Policy: operator})
		if err != nil {
			t.Fatalf("ref %s: %v", c.ref, err)
		}
		if got := read(t, filepath.Join(dir, c.file)); got != c.want {
			t.Errorf("ref %s: %s = %q, want %q", c.ref, c.file, got, c.want)
		}
		if !strings.Contains(progress.String(), "checked out "+p.Commit) {
			t.Errorf("ref %s: progress %q", c.ref, progress.String())
		}
	}
}

func TestPrepareBadInput(t *testing.T) {
	src, _, _ := gitRepo(t)
	plain := t.TempDir()
	file := filepath.Join(plain, "f")
	write(t, plain, "f", "x")
	cases := []Spec{
		{Source: src, Ref: "no-such-branch", Dir: filepath.Join(t.TempDir(), "a")},
		{Source: src, Ref: "--upload-pack=evil", Dir: filepath.Join(t.TempDir(), "b")},
		{Source: src, Ref: "a..b", Dir: filepath.Join(t.TempDir(), "c")},
		{Source: "/does/not/exist"},
		{Source: file},
		{Source: plain, Ref: "main"},
		{Mode: "copy", Source: src},
		{Mode: Empty, Source: src},
		{Source: "https://user:secret@example.invalid/repo.git", Dir: filepath.Join(t.TempDir(), "d")},
	}
	for _, spec := range cases {
		spec.Policy = operator
		_, err := Prepare(context.Background(), spec)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Prepare(%+v) = %v, want ErrInvalid", spec, err)
		}
		if spec.Dir != "" {
			if _, err := os.Stat(spec.Dir); err == nil {
				t.Errorf("Prepare(%+v) left %s behind", spec, spec.Dir)
			}
		}
	}
}

func TestBindAndEmpty(t *testing.T) {
	plain := t.TempDir()
	p, err := Prepare(context.Background(), Spec{Source: plain, Policy: operator})
	if err != nil || p.Mode != Bind || p.Dir != plain {
		t.Fatalf("bind: %+v %v", p, err)
	}
	dir := filepath.Join(t.TempDir(), "empty")
	p, err = Prepare(context.Background(), Spec{Dir: dir})
	if err != nil || p.Mode != Empty {
		t.Fatalf("empty: %+v %v", p, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("empty workspace has %d entries", len(entries))
	}
}

func TestDiffAgainstBase(t *testing.T) {
	src, _, _ := gitRepo(t)
	dir := filepath.Join(t.TempDir(), "ws")
	p, err := Prepare(context.Background(), Spec{Source: src, Dir: dir, Policy: operator})
	if err != nil {
		t.Fatal(err)
	}
	a, err := OpenAudit(filepath.Join(t.TempDir(), "audit.git"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, ".gitignore", "*.log\n")
	ctx := context.Background()
	if _, err := a.SetBase(ctx, HostTree(dir), p.Commit); err != nil {
		t.Fatal(err)
	}
	if d, err := a.Diff(ctx, HostTree(dir), 0); err != nil || len(d.Files) != 0 || d.Patch != "" {
		t.Fatalf("fresh workspace diff: %+v %v", d, err)
	}
	write(t, dir, "README.md", "version two\nplus a line\n")          // modified
	write(t, dir, "new/added.txt", "brand new\n")                     // untracked
	write(t, dir, "debug.log", "not ignored\n")                       // .gitignore'd, recorded all the same
	write(t, dir, "blob.bin", "\x00\x01\x02binary")                   // binary, untracked
	if err := os.Remove(filepath.Join(dir, "gone.txt")); err != nil { // deleted
		t.Fatal(err)
	}
	d, err := a.Diff(ctx, HostTree(dir), 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]FileChange{}
	for _, f := range d.Files {
		got[f.Path] = f
	}
	want := map[string]FileChange{
		"README.md":     {Path: "README.md", Status: "modified", Additions: 1},
		"new/added.txt": {Path: "new/added.txt", Status: "added", Additions: 1},
		"gone.txt":      {Path: "gone.txt", Status: "deleted", Deletions: 1},
		"blob.bin":      {Path: "blob.bin", Status: "added", Binary: true},
		"debug.log":     {Path: "debug.log", Status: "added", Additions: 1},
	}
	if len(got) != len(want) {
		t.Errorf("changed files %v, want %v", got, want)
	}
	for k, w := range want {
		if g := got[k]; g != w {
			t.Errorf("%s: %+v, want %+v", k, g, w)
		}
	}
	for _, s := range []string{"+plus a line", "+brand new", "-to be deleted", "--- a/gone.txt", "+++ b/new/added.txt"} {
		if !strings.Contains(d.Patch, s) {
			t.Errorf("patch lacks %q:\n%s", s, d.Patch)
		}
	}
	small, _ := a.Diff(ctx, HostTree(dir), 40)
	if !small.Truncated || len(small.Files) != 5 || len(small.Patch) > 40+100 {
		t.Errorf("capped diff: truncated %v files %d", small.Truncated, len(small.Files))
	}
}

func TestSnapshotsFormAHistory(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.txt", "1\n")
	a, err := OpenAudit(filepath.Join(t.TempDir(), "audit.git"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	base, err := a.SetBase(ctx, HostTree(dir), "empty")
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "a.txt", "2\n")
	if _, err := a.Snapshot(ctx, HostTree(dir), "pause"); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "b.txt", "3\n")
	last, err := a.Snapshot(ctx, HostTree(dir), "archive")
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := a.Snapshots()
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, s := range snaps {
		reasons = append(reasons, s.Reason)
	}
	if strings.Join(reasons, ",") != "archive,pause,base: empty" || snaps[0].ID != last || snaps[2].ID != base {
		t.Fatalf("snapshots %+v", snaps)
	}
	// Reopening finds the same history: it lives on disk.
	b, err := OpenAudit(a.dir)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := b.Snapshots(); len(again) != 3 {
		t.Fatalf("after reopen: %d snapshots", len(again))
	}
}
