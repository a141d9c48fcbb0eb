package runner

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

var treeLimits = proto.TreeArgs{MaxEntries: 1000, MaxDepth: 16, MaxFileBytes: 1 << 20, MaxReadBytes: 8 << 20}

// treeOf asks the runner at c for root's tree with known keys and returns
// "path kind flag" per entry, and the stamps of the files.
func treeOf(t *testing.T, root string, args proto.TreeArgs, known []byte) ([]string, map[string]proto.Stamp) {
	t.Helper()
	c := pair(t, Ops())
	args.Root = root
	st, err := c.Open(context.Background(), proto.OpTree, args, known)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := proto.NewTreeReader(st, proto.TreeLimits{MaxEntries: args.MaxEntries, MaxDepth: args.MaxDepth, MaxFileBytes: args.MaxFileBytes, MaxReadBytes: args.MaxReadBytes})
	var dirs, out []string
	stamps := map[string]proto.Stamp{}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind == proto.RecEnd {
			dirs = dirs[:len(dirs)-1]
			continue
		}
		p := strings.Join(append(dirs[:len(dirs):len(dirs)], rec.Name), "/")
		line := p + " " + string(rec.Kind)
		switch rec.Kind {
		case proto.RecDir:
			dirs = append(dirs, rec.Name)
		case proto.RecFile:
			stamps[p] = rec.Stamp
			line += string('0' + rec.Flag)
			if rec.Content != nil {
				b, _ := io.ReadAll(rec.Content)
				line += " " + strings.TrimSpace(string(b))
			}
		case proto.RecLink:
			line += " -> " + rec.Target
		}
		out = append(out, line)
	}
	if err := st.Result(nil); err != nil {
		t.Fatal(err)
	}
	return out, stamps
}

func TestTreeStreamsContentOnlyOfFilesTheServerLacks(t *testing.T) {
	root := t.TempDir()
	for p, c := range map[string]string{"b.txt": "bee\n", "a/x.txt": "ex\n", "node_modules/m/i.js": "js\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte(c), 0o644)
	}
	os.Symlink("/etc/passwd", filepath.Join(root, "link"))
	args := treeLimits
	args.Prune = []proto.Prune{{Glob: "node_modules", DirOnly: true}}
	got, stamps := treeOf(t, root, args, nil)
	want := "a d|a/x.txt f1 ex|b.txt f1 bee|link l -> /etc/passwd"
	if strings.Join(got, "|") != want {
		t.Fatalf("first walk:\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
	// The server has b.txt as it is now: it comes without its content.
	known := binary.BigEndian.AppendUint64(nil, proto.StampKey("b.txt", stamps["b.txt"]))
	got, _ = treeOf(t, root, args, known)
	if want := "a d|a/x.txt f1 ex|b.txt f0|link l -> /etc/passwd"; strings.Join(got, "|") != want {
		t.Fatalf("second walk:\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
	// Past the caps, content is withheld, and the walk stops at the entries cap.
	args.MaxFileBytes = 2
	args.MaxEntries = 2
	got, _ = treeOf(t, root, args, nil)
	if want := "a d|a/x.txt f2"; strings.Join(got, "|") != want {
		t.Fatalf("capped walk:\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
}

func TestTreeRefusesBadArguments(t *testing.T) {
	c := pair(t, Ops())
	for _, a := range []proto.TreeArgs{{Root: "rel", MaxEntries: 1, MaxDepth: 1}, {Root: "/", MaxEntries: 0, MaxDepth: 1}} {
		if err := c.Call(context.Background(), proto.OpTree, a, nil, nil); err == nil {
			t.Errorf("%+v accepted", a)
		}
	}
	if err := c.Call(context.Background(), proto.OpTree, proto.TreeArgs{Root: "/", MaxEntries: 1, MaxDepth: 1}, []byte("odd"), nil); err == nil {
		t.Error("known keys of 3 bytes accepted")
	}
}
