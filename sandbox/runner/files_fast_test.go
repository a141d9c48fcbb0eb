package runner

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The fast way reads a file with no link on its path and only that: a
// path through a link, even one that stays in the workspace, a directory,
// a FIFO or a file over the limit is left to the slow way (which follows
// links as the jail would, or says what is wrong), having sent nothing.
func TestReadFastTakesOnlyPlainFiles(t *testing.T) {
	ws := t.TempDir()
	w := &workspace{dir: ws, mount: MountPoint}
	for _, err := range []error{
		os.MkdirAll(filepath.Join(ws, "d/e"), 0o755),
		os.WriteFile(filepath.Join(ws, "d/e/f"), []byte("plain\n"), 0o644),
		os.Symlink("d", filepath.Join(ws, "dl")),
		os.Symlink("f", filepath.Join(ws, "d/e/fl")),
		os.WriteFile(filepath.Join(ws, "big"), make([]byte, 100), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	res, ok := w.readFast("d/e/f", 1<<20, &out)
	if !ok || res.Fault != nil || res.Size != 6 || res.Jail != MountPoint+"/d/e/f" || out.String() != "plain\n" {
		t.Fatalf("a plain file: ok %v %+v %q", ok, res, out.String())
	}
	out.Reset()
	if res, ok := w.readFast(MountPoint+"/d/./e/../e/f", 1<<20, &out); !ok || res.Jail != MountPoint+"/d/e/f" {
		t.Errorf("an absolute path under the mount point: ok %v %+v", ok, res)
	}
	for _, p := range []string{"dl/e/f", "d/e/fl", "d", ".", "missing", "big", "../x", "/etc/passwd"} {
		out.Reset()
		if _, ok := w.readFast(p, 10, &out); ok || out.Len() > 0 {
			t.Errorf("%s: the fast way answered (sent %d bytes); it must leave it to the slow way", p, out.Len())
		}
	}
	// The slow way still reads through a link that stays inside.
	c := filesPair(t, ws)
	if b, res := readVia(t, c, "dl/e/fl", 1<<10); res.Fault != nil || string(b) != "plain\n" || res.Jail != MountPoint+"/d/e/f" {
		t.Errorf("through links inside: %q %+v", b, res)
	}
}
