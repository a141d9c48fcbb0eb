package sessions

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/sessions/workspace/gittest"

	"github.com/warrenhq/warren/sessions/workspace"
)

func gitRepo(t *testing.T) (dir, first, second string) { return gittest.Repo(t) }

func write(t *testing.T, dir, name, content string) { gittest.Write(t, dir, name, content) }

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestCreateClonesByPathAndFileURLAtARef(t *testing.T) {
	ctx := context.Background()
	repo, first, second := gitRepo(t)
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, AllowLocalSources: true})

	var progress strings.Builder
	byPath, err := m.Create(ctx, "alice", CreateOptions{Source: repo, Name: "by path", Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if byPath.Mode != ModeClone || byPath.BaseCommit != second || !strings.Contains(progress.String(), "cloning") {
		t.Fatalf("clone by path: %+v, progress %q", byPath.Info(), progress.String())
	}
	if byPath.Workspace != filepath.Join(data, "workspaces", byPath.ID) || !exists(filepath.Join(byPath.Workspace, "README.md")) {
		t.Fatalf("workspace %s", byPath.Workspace)
	}
	for _, tc := range []struct{ ref, file, commit string }{
		{"feature", "feature.txt", ""},
		{"v1", "gone.txt", first},
		{first, "gone.txt", first},
	} {
		s, err := m.Create(ctx, "alice", CreateOptions{Source: "file://" + repo, Ref: tc.ref})
		if err != nil {
			t.Fatalf("ref %s: %v", tc.ref, err)
		}
		if !exists(filepath.Join(s.Workspace, tc.file)) || tc.commit != "" && s.BaseCommit != tc.commit || s.Ref != tc.ref {
			t.Fatalf("ref %s: %+v", tc.ref, s.Info())
		}
	}
	readme, _ := os.ReadFile(filepath.Join(repo, "README.md"))
	if string(readme) != "version two\n" || exists(filepath.Join(repo, "feature.txt")) {
		t.Fatal("the source repository was modified")
	}
	for _, bad := range []CreateOptions{
		{Source: repo, Ref: "no-such-branch"},
		{Source: repo, Ref: "--upload-pack=evil"},
		{Source: filepath.Join(repo, "missing")},
		{Mode: "tarball"},
	} {
		if _, err := m.Create(ctx, "alice", bad); !errors.Is(err, workspace.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(data, "workspaces"))
	if len(entries) != 4 {
		t.Errorf("failed creates left workspaces behind: %d entries", len(entries))
	}
}

func TestLocalSourcesNeedPermission(t *testing.T) {
	repo, _, _ := gitRepo(t)
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data})
	for _, src := range []string{repo, "file://" + repo} {
		_, err := m.Create(context.Background(), "alice", CreateOptions{Source: src})
		if !errors.Is(err, workspace.ErrInvalid) || !strings.Contains(err.Error(), "--allow-local-sources") {
			t.Errorf("%s: %v", src, err)
		}
	}
}

func TestDiffShowsModifiedAddedDeletedAndUntrackedFiles(t *testing.T) {
	ctx := context.Background()
	repo, _, _ := gitRepo(t)
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, AllowLocalSources: true})
	s, err := m.Create(ctx, "alice", CreateOptions{Source: repo})
	if err != nil {
		t.Fatal(err)
	}
	_, d, err := m.Diff(ctx, "alice", s.ID, 0)
	if err != nil || len(d.Files) != 0 {
		t.Fatalf("fresh clone: %+v %v", d, err)
	}
	write(t, s.Workspace, "README.md", "version three\n")
	write(t, s.Workspace, "new/added.txt", "hello\n")
	write(t, s.Workspace, "debug.log", "recorded\n") // .gitignore'd: the audit records it anyway
	os.Remove(filepath.Join(s.Workspace, "gone.txt"))
	_, d, err = m.Diff(ctx, "alice", s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range d.Files {
		got[f.Path] = f.Status
	}
	want := map[string]string{"README.md": "modified", "new/added.txt": "added", "gone.txt": "deleted", "debug.log": "added"}
	if len(got) != len(want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	for p, st := range want {
		if got[p] != st {
			t.Fatalf("files %v, want %v", got, want)
		}
	}
	if !strings.Contains(d.Patch, "-version two") || !strings.Contains(d.Patch, "+version three") || !strings.Contains(d.Patch, "+recorded") {
		t.Fatalf("patch:\n%s", d.Patch)
	}
	if _, d, _ = m.Diff(ctx, "alice", s.ID, 20); !d.Truncated {
		t.Fatal("a 20-byte cap did not truncate")
	}
	if _, _, err := m.Diff(ctx, "bob", s.ID, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob diffs alice's session: %v", err)
	}
}

func TestLifecycleTransitions(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	var mu sync.Mutex
	var ended []string
	m := newManager(t, openDB(t, data), Config{DataDir: data, OnEnd: func(_ context.Context, id string) {
		mu.Lock()
		ended = append(ended, id)
		mu.Unlock()
	}})
	s, err := m.Create(ctx, "alice", CreateOptions{Name: "work"})
	if err != nil {
		t.Fatal(err)
	}
	write(t, s.Workspace, "f.txt", "x\n")
	step := func(action string, wantState State, wantErr string) {
		t.Helper()
		_, err := m.Control(ctx, "alice", s.ID, action)
		switch {
		case wantErr == "" && err != nil:
			t.Fatalf("%s: %v", action, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Fatalf("%s: error %v, want %q", action, err, wantErr)
		case wantErr != "" && !errors.Is(err, ErrInvalidTransition):
			t.Fatalf("%s: %v is not ErrInvalidTransition", action, err)
		}
		if got := s.State(); got != wantState {
			t.Fatalf("after %s: state %s, want %s", action, got, wantState)
		}
	}
	refused := func(wantRun, wantWrite string) {
		t.Helper()
		if _, _, err := m.openCommand(ctx, "alice", s.ID, "ls"); err == nil || !strings.Contains(err.Error(), wantRun) {
			t.Fatalf("command: %v, want %q", err, wantRun)
		}
		if _, _, err := m.OpenFiles(ctx, "alice", s.ID, true); err == nil || !strings.Contains(err.Error(), wantWrite) {
			t.Fatalf("write: %v, want %q", err, wantWrite)
		}
	}

	step("resume", StateActive, "cannot resume session "+s.ID+": it is active, and only a paused session can be resumed")
	step("pause", StatePaused, "")
	step("pause", StatePaused, "cannot pause session "+s.ID+": it is paused")
	refused("cannot run commands in session "+s.ID+": it is paused; resume it first", "cannot write files in session "+s.ID+": it is paused")
	if _, _, err := m.OpenFiles(ctx, "alice", s.ID, false); err != nil {
		t.Fatalf("reading a paused session: %v", err)
	}
	step("resume", StateActive, "")
	if _, _, err := m.openCommand(ctx, "alice", s.ID, "ls"); err != nil {
		t.Fatalf("resumed: %v", err)
	}
	step("archive", StateArchived, "")
	refused("it is archived and read-only", "cannot write files in session "+s.ID+": it is archived and read-only")
	if _, _, err := m.OpenFiles(ctx, "alice", s.ID, false); err != nil {
		t.Fatalf("reading an archived session: %v", err)
	}
	step("archive", StateArchived, "cannot archive session "+s.ID+": it is archived already")
	step("resume", StateArchived, "it is archived, and only a paused session can be resumed")
	step("pause", StateArchived, "it is archived, and only an active session can be paused")
	snaps, err := m.Snapshots(ctx, "alice", s.ID)
	if err != nil || len(snaps) != 3 || snaps[0].Reason != "archive" || snaps[1].Reason != "pause" {
		t.Fatalf("snapshots %+v %v", snaps, err)
	}
	step("delete", StateDeleted, "")
	if exists(s.Workspace) || exists(filepath.Join(data, "audit", s.ID+".git")) {
		t.Fatal("delete left the workspace or the audit repository")
	}
	step("delete", StateDeleted, "it was deleted")
	refused("it was deleted", "it was deleted")
	if _, err := m.Control(ctx, "alice", s.ID, "explode"); !errors.Is(err, workspace.ErrInvalid) {
		t.Fatalf("unknown action: %v", err)
	}
	mu.Lock()
	if len(ended) != 1 || ended[0] != s.ID {
		t.Fatalf("OnEnd calls %v, want one for %s", ended, s.ID)
	}
	mu.Unlock()

	// Its row is gone: a restarted server does not know it at all.
	m2 := newManager(t, openDB(t, data), Config{DataDir: data})
	for _, all := range []bool{false, true} {
		if list, _ := m2.List(ctx, "alice", all); len(list) != 0 {
			t.Fatalf("deleted session listed (with deleted ones: %v): %+v", all, list)
		}
	}
	if _, err := m2.Get(ctx, "alice", s.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deleted session after a restart: %v, want ErrNotFound", err)
	}
}

func TestDeleteNeverRemovesABoundDirectory(t *testing.T) {
	ctx := context.Background()
	data, mine := jailData(t), jailData(t)
	write(t, mine, "precious.txt", "keep me\n")
	m := newManager(t, openDB(t, data), Config{DataDir: data, AllowLocalSources: true})
	s, err := m.Create(ctx, "alice", CreateOptions{Source: mine})
	if err != nil || s.Mode != ModeBind || s.Workspace != mine {
		t.Fatalf("bind: %+v %v", s, err)
	}
	if _, err := m.Delete(ctx, "alice", s.ID); err != nil {
		t.Fatal(err)
	}
	if !exists(filepath.Join(mine, "precious.txt")) {
		t.Fatal("deleting a bind session removed the user's directory")
	}
}

func TestOwnershipAndSessionCap(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, MaxSessionsPerUser: 2})
	a1, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "alice", CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = m.Create(ctx, "alice", CreateOptions{})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "you have 2 sessions, the limit per user is 2") {
		t.Fatalf("third session: %v", err)
	}
	if _, err := m.Create(ctx, "bob", CreateOptions{}); err != nil {
		t.Fatalf("bob is capped by alice's sessions: %v", err)
	}
	for _, action := range []string{"pause", "resume", "archive", "delete"} {
		if _, err := m.Control(ctx, "bob", a1.ID, action); !errors.Is(err, ErrNotFound) {
			t.Fatalf("bob %s alice's session: %v", action, err)
		}
	}
	if _, _, err := m.OpenFiles(ctx, "bob", a1.ID, false); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob reads alice's session: %v", err)
	}
	list, _ := m.List(ctx, "bob", true)
	if len(list) != 1 {
		t.Fatalf("bob lists %d sessions", len(list))
	}
	if _, err := m.Delete(ctx, "alice", a1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "alice", CreateOptions{}); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
}

func TestQuotaRefusesFileWritesThatWouldCrossIt(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, QuotaBytes: 64 << 10, QuotaInterval: time.Hour})
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.OpenFiles(ctx, "alice", s.ID, true); err != nil {
		t.Fatal(err)
	}
	// Accepted writes add up, walked or not: the second would cross.
	if err := m.CheckWrite(s, 40<<10, "write a.txt"); err != nil {
		t.Fatal(err)
	}
	write(t, s.Workspace, "a.txt", strings.Repeat("x", 40<<10))
	err = m.CheckWrite(s, 40<<10, "write b.txt")
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "cannot write b.txt") || !strings.Contains(err.Error(), "over its quota of 64.0 KiB") {
		t.Fatalf("a write that would cross the quota: %v", err)
	}
	if err := m.CheckWrite(s, -1<<20, "shrink a.txt"); err != nil {
		t.Fatalf("a write that shrinks a file: %v", err)
	}
}

func TestQuotaOverItRefusesWritesNotReads(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, QuotaBytes: 64 << 10, QuotaInterval: 1})
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, s.Workspace, "big.bin", strings.Repeat("x", 200<<10))
	_, _, err = m.OpenFiles(ctx, "alice", s.ID, true)
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "cannot write files") || !strings.Contains(err.Error(), "over its quota of 64.0 KiB") {
		t.Fatalf("write over quota: %v", err)
	}
	if _, _, err := m.OpenFiles(ctx, "alice", s.ID, false); err != nil {
		t.Fatalf("read over quota: %v", err)
	}
	os.Remove(filepath.Join(s.Workspace, "big.bin"))
	if _, _, err := m.OpenFiles(ctx, "alice", s.ID, true); err != nil {
		t.Fatalf("after freeing space: %v", err)
	}
}

func TestParseAndFormatBytes(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "500M": 500 << 20, "10GiB": 10 << 30, "1.5G": 3 << 29, "64k": 64 << 10} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseBytes("lots"); err == nil {
		t.Error("ParseBytes(lots) succeeded")
	}
	for n, want := range map[int64]string{512: "512 B", 1536: "1.5 KiB", 3 << 30: "3.0 GiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// A session another process deleted (the CLI, rows and all) is deleted to
// a running server too once it looks again: its shell stops, and tools say
// it was deleted.
func TestDeleteByAnotherProcessStopsTheShell(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	server := newManager(t, openDB(t, data), Config{DataDir: data})
	s, err := server.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.Exec(ctx, "alice", s.ID, "true", ExecOptions{Timeout: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if !server.Running(s.ID) {
		t.Fatal("the shell is not running after a command")
	}
	cli := newManager(t, openDB(t, data), Config{DataDir: data})
	if _, err := cli.Delete(ctx, "alice", s.ID); err != nil {
		t.Fatal(err)
	}
	server.now = func() time.Time { return time.Now().Add(time.Hour) } // past the cache's recheck
	_, _, err = server.openCommand(ctx, "alice", s.ID, "true")
	if err == nil || !strings.Contains(err.Error(), "it was deleted") {
		t.Fatalf("a command in a session another process deleted: %v, want \"it was deleted\"", err)
	}
	if server.Running(s.ID) {
		t.Fatal("the deleted session's shell still runs")
	}
}
