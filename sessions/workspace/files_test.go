package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sessions/errs"
)

func TestRelPath(t *testing.T) {
	f := &Files{mount: "/workspace"}
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{in: "a.txt", want: "a.txt"},
		{in: "./src/../b.go", want: "b.go"},
		{in: "/workspace", want: "."},
		{in: "/workspace/x/y", want: "x/y"},
		{in: "/workspace/../etc/passwd", bad: true},
		{in: "/workspacefoo/x", bad: true},
		{in: "/etc/passwd", bad: true},
		{in: "../x", bad: true},
		{in: "a/../../x", bad: true},
		{in: "", bad: true},
		{in: "a\x00b", bad: true},
	} {
		got, err := f.relPath(tc.in)
		if tc.bad != (err != nil) || (!tc.bad && got != tc.want) {
			t.Errorf("relPath(%q) = %q, %v; want %q, bad=%v", tc.in, got, err, tc.want, tc.bad)
		}
		if tc.bad && errs.CodeOf(err) != errs.Invalid {
			t.Errorf("relPath(%q): code %q, want invalid", tc.in, errs.CodeOf(err))
		}
	}
}

func TestResolveFollowsLinksOnlyWithinTheWorkspace(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"sub"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "real.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"link":     "real.txt",
		"abs":      "/workspace/real.txt",
		"chain":    "link",
		"dirlink":  "sub",
		"absdir":   "/workspace/sub",
		"dangling": "new/made.txt",
		"rootdots": "/../workspace/./real.txt",
		"viadir":   "absdir/../real.txt", // .. of the link's target, as the kernel does
		"wsroot":   "/workspace",
		"out":      "/etc/passwd",
		"up":       "../x",
		"upup":     "sub/../../x",
		"absup":    "/workspace/../etc/passwd",
		"tmp":      "/tmp/x",
		"loop":     "loop",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	f := openFiles(t, dir)
	for _, tc := range []struct {
		in, want, bad string
	}{
		{in: "real.txt", want: "real.txt"},
		{in: ".", want: "."},
		{in: "link", want: "real.txt"},
		{in: "abs", want: "real.txt"},
		{in: "chain", want: "real.txt"},
		{in: "dirlink/x", want: "sub/x"},
		{in: "absdir/x", want: "sub/x"},
		{in: "dangling", want: "new/made.txt"},
		{in: "missing/x", want: "missing/x"},
		{in: "rootdots", want: "real.txt"},
		{in: "viadir", want: "real.txt"},
		{in: "wsroot", want: "."},
		{in: "wsroot/link", want: "real.txt"},
		{in: "out", bad: "/workspace/out is a symbolic link to /etc/passwd, outside the workspace"},
		{in: "up", bad: "/workspace/up leads outside the workspace"},
		{in: "upup", bad: "/workspace/upup leads outside the workspace"},
		{in: "absup", bad: "/workspace/absup leads outside the workspace"},
		{in: "tmp", bad: "outside the workspace"},
		{in: "absdir/../up", bad: "outside the workspace"},
		{in: "loop", bad: "too many symbolic links"},
		{in: "real.txt/x", bad: "not a directory"},
	} {
		got, err := f.Resolve(tc.in)
		switch {
		case tc.bad == "" && (err != nil || got.Rel != tc.want):
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.in, got.Rel, err, tc.want)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("Resolve(%q) = %q, %v; want an error containing %q", tc.in, got.Rel, err, tc.bad)
		}
	}
}

// A caller switches on the code of a refusal, and finds what it is about
// with errors.Is: a missing file, a path out of the workspace, something
// that is not a regular file, a file over the limit.
func TestFilesErrorsAreCoded(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	f := openFiles(t, dir)
	read := func(p string) error {
		rp, err := f.Resolve(p)
		if err != nil {
			return err
		}
		_, err = f.ReadFile(rp, 10)
		return err
	}
	write := func(p string) error {
		rp, err := f.Resolve(p)
		if err != nil {
			return err
		}
		return f.WriteFile(rp, []byte("x"))
	}
	for _, tc := range []struct {
		name string
		err  error
		code errs.Code
		is   error
		msg  string
	}{
		{"missing", read("missing.txt"), errs.NotFound, fs.ErrNotExist, "missing.txt does not exist: check the path (it is relative to /workspace)"},
		{"outside", read("../x"), errs.Invalid, ErrOutside, `path "../x" is outside the workspace`},
		{"link out", read("out"), errs.Invalid, ErrOutside, "/workspace/out is a symbolic link to /etc/passwd"},
		{"fifo", read("pipe"), errs.Invalid, ErrNotRegular, "pipe is not a regular file (p---------)"},
		{"directory", read("sub"), errs.Invalid, ErrNotRegular, "sub is a directory"},
		{"too big", read("big"), errs.Limit, ErrTooBig, "big is 100 bytes, over the limit of 10"},
		{"write fifo", write("pipe"), errs.Invalid, ErrNotRegular, "/workspace/pipe is not a regular file"},
		{"write directory", write("sub"), errs.Invalid, ErrNotRegular, "/workspace/sub is a directory, not a file"},
		{"write under a file", write("big/x"), errs.Invalid, syscall.ENOTDIR, "big/x: "},
		{"empty", read(""), errs.Invalid, ErrBadPath, "path is empty"},
	} {
		if got := errs.CodeOf(tc.err); got != tc.code || !errors.Is(tc.err, tc.is) || !strings.Contains(tc.err.Error(), tc.msg) {
			t.Errorf("%s: %v (code %s); want code %s, a match for %v, and %q", tc.name, tc.err, got, tc.code, tc.is, tc.msg)
		}
	}
	var fe *FileError
	if err := read("sub"); !errors.As(err, &fe) || fe.Jail != "/workspace/sub" || fe.Type != fs.ModeDir {
		t.Errorf("the error does not say what the entry is and where the jail sees it: %+v", fe)
	}
}

func openFiles(t *testing.T, dir string) *Files {
	t.Helper()
	f, err := OpenFiles(dir, Jail{Mount: "/workspace", UID: os.Getuid(), GID: os.Getgid()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// The file a write replaces is let go in the background: however many
// writes run, its descriptors do not pile up.
func TestWriteFileReleasesReplacedFiles(t *testing.T) {
	dir := t.TempDir()
	f := openFiles(t, dir)
	p, err := f.Resolve("out.txt")
	if err != nil {
		t.Fatal(err)
	}
	open := func() int {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(fds)
	}
	before := open()
	for i := range 1000 {
		if err := f.WriteFile(p, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := open() - before; n > cap(toClose) {
		t.Errorf("%d more descriptors are open after 1000 writes: replaced files are not released", n)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	if err != nil || len(b) != 1 || b[0] != byte(999%256) {
		t.Errorf("out.txt holds %v (%v), want the last write", b, err)
	}
}

// A write replaces a file with one that keeps its mode (whatever the
// umask), owner and ACL; a new file gets 0644 and the jail's uid.
func TestWriteFileKeepsModeOwnerAndACL(t *testing.T) {
	dir := t.TempDir()
	j := Jail{Mount: "/workspace", UID: os.Getuid(), GID: os.Getgid()}
	owner := j.UID
	if os.Geteuid() == 0 {
		j.UID, j.GID, owner = 65534, 65534, 1234
	}
	// u::rw-, u:65534:rw-, g::r--, m::rw-, o::---
	acl := []byte{2, 0, 0, 0,
		1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
		2, 0, 6, 0, 0xfe, 0xff, 0, 0,
		4, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
		0x10, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
		0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}
	for name, mode := range map[string]fs.FileMode{"acl.txt": 0o640, "plain.txt": 0o606} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("old"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, owner, owner); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Setxattr(filepath.Join(dir, "acl.txt"), aclXattr, acl, 0); err != nil {
		t.Fatal(err)
	}
	type attrs struct {
		mode     fs.FileMode
		uid, gid uint32
		acl      string
	}
	attrsOf := func(name string) attrs {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, name), &st); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 256)
		n, err := unix.Lgetxattr(filepath.Join(dir, name), aclXattr, buf)
		if err != nil {
			n = 0
		}
		return attrs{fs.FileMode(st.Mode & 0o7777), st.Uid, st.Gid, string(buf[:n])}
	}
	before := map[string]attrs{"acl.txt": attrsOf("acl.txt"), "plain.txt": attrsOf("plain.txt")}
	f, err := OpenFiles(dir, j)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range []string{"acl.txt", "plain.txt", "new.txt"} {
		p, err := f.Resolve(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.WriteFile(p, []byte("new")); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range before {
		if got := attrsOf(name); got != want {
			t.Errorf("%s after a write: %+v, want %+v as before", name, got, want)
		}
	}
	want := attrs{0o644, uint32(j.UID), uint32(j.GID), ""}
	if got := attrsOf("new.txt"); got != want {
		t.Errorf("new.txt: %+v, want %+v", got, want)
	}
}
