package sessions

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/sandbox/runner"
	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
	"github.com/warrenhq/warren/sessions/workspace"
)

// lyingRunner serves a tree operation that sends what stream writes, over
// a net.Pipe: a runner that a jail took over, as far as the server knows.
func lyingRunner(t *testing.T, stream func(w io.Writer) error) workspace.TreeSource {
	t.Helper()
	a, b := net.Pipe()
	ops := map[string]runner.Handler{proto.OpTree: func(c *runner.Call) (any, error) {
		if err := stream(c.Out); err != nil {
			return nil, err
		}
		return proto.TreeResult{}, nil
	}}
	go func() { _ = runner.NewServer(ops).Serve(b); b.Close() }()
	c := client.New(a)
	t.Cleanup(func() { c.Close() })
	return runnerTree{c}
}

// endlessWriter writes rec again and again until the reader stops.
func endlessWriter(w io.Writer, rec []byte) error {
	buf := make([]byte, 0, 64<<10)
	for len(buf)+len(rec) <= cap(buf) {
		buf = append(buf, rec...)
	}
	for {
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
}

// A runner that lies (endless streams, endless content, names that climb
// out, absolute or NUL-laden names, huge names, duplicates) gets its
// snapshot refused: nothing is recorded, nothing is written outside the
// audit repository, and the server stops reading at its limits.
func TestALyingRunnerCannotPushTheAuditPastItsLimitsOrOutOfItsRepository(t *testing.T) {
	root := t.TempDir()
	auditDir := filepath.Join(root, "audit.git")
	a, err := workspace.OpenAudit(auditDir)
	if err != nil {
		t.Fatal(err)
	}
	a.SetLimits(workspace.Limits{MaxEntries: 1000, MaxReadBytes: 1 << 20, MaxFileBytes: 64 << 10})
	ctx := context.Background()
	empty := t.TempDir()
	if _, err := a.SetBase(ctx, workspace.HostTree(empty), "empty"); err != nil {
		t.Fatal(err)
	}
	file := func(name string, size int) []byte {
		b := proto.AppendFile(nil, name, proto.Stamp{Mode: 0o100644, Size: int64(size)}, proto.ContentSent)
		return append(append(b, strings.Repeat("x", size)...), 1)
	}
	huge := append([]byte{proto.RecFile, 0xff, 0xff}, make([]byte, 1<<16)...)
	cases := map[string]func(w io.Writer) error{
		"endless directories": func(w io.Writer) error { return endlessWriter(w, proto.AppendDir(nil, "d")) },
		"endless entries": func(w io.Writer) error {
			for i := 0; ; i++ {
				if _, err := w.Write(proto.AppendLink(nil, strings.Repeat("a", 200)+string(rune('a'+i%26))+strings.Repeat("z", i/26%50), "x")); err != nil {
					return err
				}
			}
		},
		"endless content": func(w io.Writer) error {
			for i := 0; ; i++ {
				if _, err := w.Write(file(strings.Repeat("f", 1+i/200)+string(rune('a'+i%200)), 60<<10)); err != nil {
					return err
				}
			}
		},
		"a file bigger than it says": func(w io.Writer) error { return endlessWriter(w, file("a", 10)) },
		"climbing out":               func(w io.Writer) error { _, err := w.Write(file("..", 5)); return err },
		"climbing out inside":        func(w io.Writer) error { _, err := w.Write(file("../../../../etc/cron.d/x", 5)); return err },
		"absolute":                   func(w io.Writer) error { _, err := w.Write(file("/etc/passwd", 5)); return err },
		"nul":                        func(w io.Writer) error { _, err := w.Write(file("a\x00/../b", 5)); return err },
		"huge name":                  func(w io.Writer) error { _, err := w.Write(huge); return err },
		"duplicates":                 func(w io.Writer) error { _, err := w.Write(append(file("a", 1), file("a", 2)...)); return err },
		"over the file cap":          func(w io.Writer) error { _, err := w.Write(file("a", 65<<10)); return err },
	}
	before, _ := a.Snapshots()
	for name, stream := range cases {
		_, err := a.Snapshot(ctx, lyingRunner(t, stream), "lie")
		if !errors.Is(err, proto.ErrTree) {
			t.Errorf("%s: %v, want the stream refused as malformed", name, err)
		}
		if _, err := a.Diff(ctx, lyingRunner(t, stream), 0); !errors.Is(err, proto.ErrTree) {
			t.Errorf("%s: diff: %v, want the stream refused as malformed", name, err)
		}
	}
	if after, _ := a.Snapshots(); len(after) != len(before) {
		t.Fatalf("a refused stream was recorded as a snapshot: %d snapshots, then %d", len(before), len(after))
	}
	// Nothing outside the audit repository, and nothing in it named by the
	// runner.
	entries, _ := os.ReadDir(root)
	if len(entries) != 1 || entries[0].Name() != "audit.git" {
		t.Fatalf("files beside the audit repository: %v", entries)
	}
	var size int64
	filepath.WalkDir(auditDir, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			info, _ := e.Info()
			size += info.Size()
			if strings.Contains(p, "etc") || strings.Contains(p, "passwd") {
				t.Errorf("the audit repository holds %s", p)
			}
		}
		return nil
	})
	// The content blobs written before a refusal stay within the read cap
	// of each walk (22 walks of at most 1 MiB, compressed).
	if size > 22<<20 {
		t.Fatalf("the audit repository grew to %d bytes", size)
	}
}
