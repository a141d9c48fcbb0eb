package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkWriteFile times what write_file does to the workspace for one
// call: open the workspace, resolve the path, size what it replaces (for
// the quota), replace the file (4 KB) or create a new one, close. The median is reported beside the mean, which
// the file system's stalls skew. Run:
// go test -run '^$' -bench WriteFile ./sessions/workspace/
func BenchmarkWriteFile(b *testing.B) {
	data := []byte(strings.Repeat("abcdefghijklmno\n", 256))
	for _, tc := range []struct {
		name string
		path func(i int) string
	}{
		{"replace", func(int) string { return "out.txt" }},
		{"replace-nested", func(int) string { return "src/pkg/sub/out.txt" }},
		{"new", func(i int) string { return fmt.Sprintf("new-%d.txt", i) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "src/pkg/sub"), 0o755); err != nil {
				b.Fatal(err)
			}
			j := Jail{Mount: "/workspace", UID: os.Getuid(), GID: os.Getgid()}
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				f, err := OpenFiles(dir, j)
				if err != nil {
					b.Fatal(err)
				}
				p, err := f.Resolve(tc.path(i))
				if err == nil {
					_ = f.Size(p) // what the quota check asks first
					err = f.WriteFile(p, data)
				}
				f.Close()
				if err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(start))
			}
			b.StopTimer()
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			b.ReportMetric(float64(times[len(times)/2])/float64(time.Microsecond), "p50-µs")
		})
	}
}
