package mcp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWorkspacePath(t *testing.T) {
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
		got, err := workspacePath(tc.in)
		if tc.bad != (err != nil) || (!tc.bad && got != tc.want) {
			t.Errorf("workspacePath(%q) = %q, %v; want %q, bad=%v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestSliceLines(t *testing.T) {
	s := "1\n2\n3\n4"
	for _, tc := range []struct {
		offset, limit int
		want          string
		truncated     bool
	}{
		{0, 0, s, false},
		{2, 2, "2\n3\n", true},
		{4, 1, "4", false},
		{9, 1, "", false},
	} {
		got := sliceLines(s, tc.offset, tc.limit)
		if got.Content != tc.want || got.Truncated != tc.truncated || got.TotalLines != 4 {
			t.Errorf("sliceLines(%d, %d) = %+v", tc.offset, tc.limit, got)
		}
	}
	big := strings.Repeat(strings.Repeat("x", 1000)+"\n", 1000)
	if got := sliceLines(big, 1, 1000); len(got.Content) > maxReadOut || !got.Truncated {
		t.Errorf("byte cap not applied: %d bytes, truncated %v", len(got.Content), got.Truncated)
	}
}

func TestOriginAllowed(t *testing.T) {
	for _, tc := range []struct {
		origin, host string
		want         bool
	}{
		{"http://localhost:7373", "127.0.0.1:7373", true},
		{"http://127.0.0.1:3000", "127.0.0.1:7373", true},
		{"http://evil.example", "127.0.0.1:7373", false},
		{"http://evil.example:7373", "evil.example:7373", false}, // DNS rebinding
		{"http://console.example", "warren.example", true},       // listed
		{"null", "127.0.0.1:7373", false},
	} {
		if got := originAllowed(tc.origin, tc.host, []string{"http://console.example"}); got != tc.want {
			t.Errorf("originAllowed(%q, %q) = %v", tc.origin, tc.host, got)
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
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w := &ws{root: r}
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
		got, err := w.resolve(tc.in)
		switch {
		case tc.bad == "" && (err != nil || got != tc.want):
			t.Errorf("resolve(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("resolve(%q) = %q, %v; want an error containing %q", tc.in, got, err, tc.bad)
		}
	}
}
