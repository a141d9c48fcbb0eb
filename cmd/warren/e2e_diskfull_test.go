package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// On a full disk the database cannot write, and SQLite says "disk I/O
// error". Tools and the CLI say instead that the disk holding the data
// directory is full, name it, and say what to do; once space is freed,
// writes work again and nothing acknowledged before is lost.
func TestFullDiskSaysWhichDiskIsFull(t *testing.T) {
	mnt := smallDisk(t, "4m")
	data := filepath.Join(mnt, "data")
	createToken(t, data, "alice") // the database exists, and a token in it
	c := serveStdio(t, "--data-dir", data)
	id := c.ok("session_create", map[string]any{})["session_id"].(string)
	record := map[string]any{"session_id": id, "model": "m", "input_tokens": 7, "output_tokens": 1}
	c.ok("usage_record", record)

	fill := fillDisk(t, mnt)

	want := "the disk holding warren's data directory " + data + " is full"
	for _, w := range []string{want, "free space"} {
		c.fails("usage_record", record, w)
	}
	out, err := exec.Command(warrenBin, "token", "create", "--user", "bob", "--data-dir", data).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), want) || !strings.Contains(string(out), "free space") {
		t.Fatalf("token create on a full disk: %v\n%s", err, out)
	}

	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	c.ok("usage_record", record)
	report := c.ok("usage_report", map[string]any{"group_by": "model"})
	if got := report["total"].(map[string]any)["input_tokens"]; got != 14.0 {
		t.Fatalf("after freeing space, usage should hold the 14 input tokens of the two acknowledged records: %v", report)
	}
}

// smallDisk mounts a tmpfs of the given size in the test's temp dir (the
// e2e tests run as root) and unmounts it when the test ends.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		t.Fatalf("mount a small tmpfs (the e2e tests run as root): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return mnt
}

// fillDisk writes a file on mnt until the disk refuses more, and returns
// its path (removing it frees the space).
func fillDisk(t *testing.T, mnt string) string {
	t.Helper()
	fill := filepath.Join(mnt, "fill")
	f, err := os.Create(fill)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for err == nil {
		_, err = f.Write(buf)
	}
	f.Close()
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("filling the disk: %v", err)
	}
	return fill
}
