package runner

import (
	"os/exec"
	"strings"
	"testing"
)

// The runner runs once per live jail: everything it links is paid per
// session. It may import the standard library, golang.org/x/sys and its
// own packages, nothing else of warren's or anyone's.
func TestRunnerLinksOnlyWhatItNeeds(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/warrenhq/warren/cmd/warren-runner").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := func(p string) bool {
		return p == "github.com/warrenhq/warren/cmd/warren-runner" ||
			p == "github.com/warrenhq/warren/sandbox/runner" ||
			strings.HasPrefix(p, "github.com/warrenhq/warren/sandbox/runner/proto") ||
			strings.HasPrefix(p, "golang.org/x/sys/")
	}
	for _, p := range strings.Fields(string(out)) {
		if !allowed(p) {
			t.Errorf("the runner links %s", p)
		}
	}
}
