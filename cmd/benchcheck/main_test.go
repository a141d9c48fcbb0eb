package main

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	out := `goos: linux
BenchmarkStdioAgainstFloors-2   2000   0 ns/op   1.10 shell_exec/floor   1.40 read_file/floor   310.0 read_file-p50-µs
PASS
`
	cases := []struct {
		name    string
		targets map[string]*target
		want    bool
		line    string
	}{
		{"met", map[string]*target{"shell_exec/floor": {max: 1.25}}, true, "ok      shell_exec/floor       1.10× ≤ 1.25×"},
		{"missed", map[string]*target{"read_file/floor": {max: 1.25}}, false, "MISS    read_file/floor        1.40× > 1.25×"},
		{"not measured", map[string]*target{"write_file/floor": {max: 1.5}}, false, "MISSING write_file/floor"},
	}
	for _, c := range cases {
		var w strings.Builder
		ok, err := check(strings.NewReader(out), &w, c.targets)
		if err != nil {
			t.Fatal(err)
		}
		if ok != c.want || !strings.Contains(w.String(), c.line) {
			t.Errorf("%s: ok=%v, want %v; output:\n%s", c.name, ok, c.want, w.String())
		}
	}
}
