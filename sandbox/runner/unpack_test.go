package runner

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner/proto"
	"github.com/warrenhq/warren/sessions/errs"
)

var unpackLimits = proto.UnpackArgs{MaxEntries: 100, MaxDepth: 16, MaxBytes: 1 << 20}

// unpack sends tree (records) to a runner's OpUnpack under root.
func unpack(t *testing.T, root string, args proto.UnpackArgs, tree []byte) (proto.UnpackResult, error) {
	t.Helper()
	c := pair(t, Ops())
	args.Root = root
	var res proto.UnpackResult
	err := c.Call(context.Background(), proto.OpUnpack, args, tree, &res)
	return res, err
}

// walk is the tree of dir as the runner's walker streams it.
func walk(t *testing.T, dir string) []byte {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := WalkTree(context.Background(), fd, proto.TreeArgs{MaxEntries: 100, MaxDepth: 16, MaxFileBytes: 1 << 20, MaxReadBytes: 1 << 20}, nil, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// file appends a RecFile with its content.
func file(b []byte, name, content string, mode uint32) []byte {
	b = proto.AppendFile(b, name, proto.Stamp{Mode: mode, Size: int64(len(content))}, proto.ContentSent)
	return append(append(b, content...), 1)
}

// A directory's tree reaches the runner's side whole: directories, files
// with their content and mode (never a set-id bit), empty files, links.
func TestUnpackWritesTheTree(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	for _, err := range []error{
		os.MkdirAll(filepath.Join(src, "a/b"), 0o755),
		os.WriteFile(filepath.Join(src, "a/b/deep.txt"), []byte("deep\n"), 0o644),
		os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755),
		os.WriteFile(filepath.Join(src, "empty"), nil, 0o600),
		os.Symlink("a/b/deep.txt", filepath.Join(src, "link")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	res, err := unpack(t, dst, unpackLimits, walk(t, src))
	if err != nil {
		t.Fatal(err)
	}
	if res.Entries != 6 || res.Bytes != int64(len("deep\n")+len("#!/bin/sh\necho hi\n")) {
		t.Errorf("the runner reports %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "a/b/deep.txt")); err != nil || string(b) != "deep\n" {
		t.Errorf("a/b/deep.txt: %q %v", b, err)
	}
	for name, mode := range map[string]os.FileMode{"run.sh": 0o755, "empty": 0o600} {
		if fi, err := os.Lstat(filepath.Join(dst, name)); err != nil || fi.Mode() != mode {
			t.Errorf("%s: %v %v, want mode %v", name, fi.Mode(), err, mode)
		}
	}
	if target, err := os.Readlink(filepath.Join(dst, "link")); err != nil || target != "a/b/deep.txt" {
		t.Errorf("link: %q %v", target, err)
	}
	// Again, as after a broken-off attempt: the same tree, nothing refused.
	if _, err := unpack(t, dst, unpackLimits, walk(t, src)); err != nil {
		t.Fatalf("unpacking the same tree again: %v", err)
	}
	// Set-id bits never come through.
	if _, err := unpack(t, dst, unpackLimits, file(nil, "suid", "x", 0o4755|unix.S_IFREG)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(dst, "suid")); err != nil || fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("suid: %v %v", fi.Mode(), err)
	}
}

// What the server sends cannot write outside the root: names that are
// paths (absolute, with "..", with "/"), links already there (placed by an
// earlier stream) that a later entry would be written through, and
// streams past their limits are refused; nothing appears outside, and no
// file is left half-written.
func TestUnpackAttacks(t *testing.T) {
	outside := t.TempDir()
	decoy := filepath.Join(outside, "decoy")
	if err := os.WriteFile(decoy, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		prep func(dst string) // what is in the root before
		args proto.UnpackArgs
		tree []byte
		code errs.Code
	}{
		{"absolute name", nil, unpackLimits, file(nil, decoy, "pwned", 0o644), errs.Invalid},
		{"dot-dot name", nil, unpackLimits, file(nil, "..", "pwned", 0o644), errs.Invalid},
		{"dot-dot dir", nil, unpackLimits, proto.AppendEnd(file(proto.AppendDir(nil, ".."), "decoy", "pwned", 0o644)), errs.Invalid},
		{"slash in a name", nil, unpackLimits, file(nil, "../"+filepath.Base(outside)+"/decoy", "pwned", 0o644), errs.Invalid},
		{"a link to outside, then a directory through it",
			func(dst string) { os.Symlink(outside, filepath.Join(dst, "d")) }, unpackLimits,
			proto.AppendEnd(file(proto.AppendDir(nil, "d"), "decoy", "pwned", 0o644)), errs.Conflict},
		{"a link to a file outside, then the file through it",
			func(dst string) { os.Symlink(decoy, filepath.Join(dst, "f")) }, unpackLimits,
			file(nil, "f", "pwned", 0o644), errs.Conflict},
		{"a link, then the same name as a link elsewhere",
			func(dst string) { os.Symlink(decoy, filepath.Join(dst, "l")) }, unpackLimits,
			proto.AppendLink(nil, "l", "somewhere-else"), errs.Conflict},
		{"a FIFO where a file comes",
			func(dst string) { unix.Mkfifo(filepath.Join(dst, "p"), 0o644) }, unpackLimits,
			file(nil, "p", "x", 0o644), errs.Conflict},
		{"over the bytes", nil, proto.UnpackArgs{MaxEntries: 100, MaxDepth: 16, MaxBytes: 10},
			file(file(nil, "a", "12345678", 0o644), "big", "123456789012345678901234567890", 0o644), errs.Invalid},
		{"too many entries", nil, proto.UnpackArgs{MaxEntries: 2, MaxDepth: 16, MaxBytes: 1 << 20},
			file(file(file(nil, "a", "1", 0o644), "b", "2", 0o644), "c", "3", 0o644), errs.Invalid},
		{"too deep", nil, proto.UnpackArgs{MaxEntries: 100, MaxDepth: 1, MaxBytes: 1 << 20},
			proto.AppendEnd(proto.AppendEnd(proto.AppendDir(proto.AppendDir(nil, "a"), "b"))), errs.Invalid},
		{"a file without its content", nil, unpackLimits,
			proto.AppendFile(nil, "f", proto.Stamp{Mode: 0o644, Size: 5}, proto.ContentWithheld), errs.Invalid},
		{"a stream cut inside a file", nil, unpackLimits,
			append(proto.AppendFile(nil, "cut", proto.Stamp{Mode: 0o644, Size: 100}, proto.ContentSent), "only this"...), errs.Invalid},
		{"limits over the hard caps", nil, proto.UnpackArgs{MaxEntries: proto.MaxUnpackEntries + 1, MaxDepth: 16, MaxBytes: 1},
			file(nil, "a", "1", 0o644), errs.Invalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := t.TempDir()
			if tc.prep != nil {
				tc.prep(dst)
			}
			_, err := unpack(t, dst, tc.args, tc.tree)
			if errs.CodeOf(err) != tc.code {
				t.Fatalf("unpack: %v (code %q), want code %q", err, errs.CodeOf(err), tc.code)
			}
			if b, err := os.ReadFile(decoy); err != nil || string(b) != "secret\n" {
				t.Fatalf("the file outside now holds %q (%v)", b, err)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 1 {
				t.Fatalf("something appeared outside: %v", ents)
			}
			for _, half := range []string{"big", "cut"} {
				if _, err := os.Lstat(filepath.Join(dst, half)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a half-written %s was left: %v", half, err)
				}
			}
		})
	}
	// The root is what the server names; a relative one is refused.
	if _, err := unpack(t, "relative/root", unpackLimits, nil); errs.CodeOf(err) != errs.Invalid || !strings.Contains(err.Error(), "absolute root") {
		t.Errorf("a relative root: %v", err)
	}
}
