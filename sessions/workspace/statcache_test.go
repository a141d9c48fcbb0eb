package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/sessions/workspace/gittest"
)

// trustAllStamps lets a test's fresh files into the stat cache, which
// otherwise waits until they are a couple of seconds old.
func trustAllStamps(t *testing.T) {
	old := racyWindow
	racyWindow = -time.Hour
	t.Cleanup(func() { racyWindow = old })
}

// TestSwappedFileIsNotTakenFromTheCache replaces a file with another of the
// same size and mtime, by rename and in place: the diff must see both.
func TestSwappedFileIsNotTakenFromTheCache(t *testing.T) {
	trustAllStamps(t)
	ws := t.TempDir()
	write(t, ws, "a.txt", "aaaa\n")
	write(t, ws, "b.txt", "bbbb\n")
	a, err := OpenAudit(filepath.Join(t.TempDir(), "audit.git"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.SetBase(ctx, HostTree(ws), "test"); err != nil {
		t.Fatal(err)
	}
	mtimeOf := func(name string) time.Time {
		info, err := os.Stat(filepath.Join(ws, name))
		if err != nil {
			t.Fatal(err)
		}
		return info.ModTime()
	}
	mtime, bMtime := mtimeOf("a.txt"), mtimeOf("b.txt")
	// By rename: another inode, same size, mode and mtime.
	write(t, ws, ".new", "AAAA\n")
	os.Chtimes(filepath.Join(ws, ".new"), mtime, mtime)
	if err := os.Rename(filepath.Join(ws, ".new"), filepath.Join(ws, "a.txt")); err != nil {
		t.Fatal(err)
	}
	// In place: same inode, size and mtime; only ctime tells.
	write(t, ws, "b.txt", "BBBB\n")
	os.Chtimes(filepath.Join(ws, "b.txt"), bMtime, bMtime)
	d, err := a.Diff(ctx, HostTree(ws), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 2 {
		t.Fatalf("diff files %+v, want a.txt and b.txt modified", d.Files)
	}
}

// TestSnapshotsOfABigGitDirectoryReadOnlyWhatChanged: the stat cache lives
// in the audit repository, so the next Audit the manager opens reads
// nothing of an unchanged .git, and only the new object after a commit.
func TestSnapshotsOfABigGitDirectoryReadOnlyWhatChanged(t *testing.T) {
	trustAllStamps(t)
	ws, _, _ := gittest.Repo(t)
	auditDir := filepath.Join(t.TempDir(), "audit.git")
	a, err := OpenAudit(auditDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.SetBase(ctx, HostTree(ws), "test"); err != nil {
		t.Fatal(err)
	}
	if a.tw.lastRead == 0 {
		t.Fatal("the base read nothing")
	}
	b, err := OpenAudit(auditDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Snapshot(ctx, HostTree(ws), "pause"); err != nil {
		t.Fatal(err)
	}
	if b.tw.lastRead != 0 {
		t.Fatalf("a snapshot of an unchanged workspace read %d bytes", b.tw.lastRead)
	}
	write(t, ws, "new.txt", "new\n")
	gittest.Git(t, ws)("add", "new.txt")
	d, err := b.Diff(ctx, HostTree(ws), 0)
	if err != nil {
		t.Fatal(err)
	}
	if b.tw.lastRead > 64<<10 {
		t.Errorf("after one git add the diff read %d bytes", b.tw.lastRead)
	}
	got := map[string]FileChange{}
	for _, f := range d.Files {
		got[f.Path] = f
	}
	if got["new.txt"].Status != "added" || got[".git/index"].Status != "modified" || got[".git/objects/"].Note == "" {
		t.Errorf("diff after git add: %+v", d.Files)
	}
}

// TestWalkLimitsAreSaid: a tree past the walk's limits is recorded up to
// them, and the diff says what it left out.
func TestWalkLimitsAreSaid(t *testing.T) {
	ws := t.TempDir()
	a, err := OpenAudit(filepath.Join(t.TempDir(), "audit.git"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.SetBase(ctx, HostTree(ws), "empty"); err != nil {
		t.Fatal(err)
	}
	write(t, ws, "a/b/c/deep.txt", "deep\n")
	write(t, ws, "big.txt", "more than ten bytes\n")
	for _, n := range []string{"x1", "x2", "x3"} {
		write(t, ws, n, "x\n")
	}
	for _, c := range []struct {
		limits Limits
		want   []string
	}{
		{Limits{MaxDepth: 2, MaxFileBytes: 10}, []string{"1 large files recorded by size only", "1 entries left out (nested too deep), e.g. [\"a/b/c\"]"}},
		{Limits{MaxEntries: 3}, []string{"entries left out (over the limit of entries per walk)"}},
	} {
		a.SetLimits(c.limits)
		d, err := a.Diff(ctx, HostTree(ws), 0)
		if err != nil {
			t.Fatal(err)
		}
		notes := strings.Join(d.Notes, "\n")
		for _, want := range c.want {
			if !strings.Contains(notes, want) {
				t.Errorf("limits %+v: notes lack %q:\n%s", c.limits, want, notes)
			}
		}
	}
}
