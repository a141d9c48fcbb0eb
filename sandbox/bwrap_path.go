package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// systemBinDirs are where distributions install bwrap; they are searched
// when PATH does not find it, so a server started with an empty or minimal
// PATH (a systemd unit, `env -i`, Claude Desktop's launcher) still works.
var systemBinDirs = []string{"/usr/bin", "/usr/local/bin", "/bin"}

// FindBwrap returns the path of the bwrap binary named name ("bwrap" when
// empty). A name with a slash is used as it is. The error says whether
// bwrap is missing or only not on PATH, and what to do.
func FindBwrap(name string) (string, error) {
	if name == "" {
		name = "bwrap"
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if !strings.Contains(name, "/") {
		for _, dir := range systemBinDirs {
			p := dir + "/" + name
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	if os.Getenv("PATH") == "" {
		return "", fmt.Errorf("bubblewrap (%s) was not found: PATH is empty and it is not in %s; "+
			"set PATH (e.g. PATH=/usr/bin:/bin) or install it with 'apt-get install bubblewrap'",
			name, strings.Join(systemBinDirs, ", "))
	}
	return "", fmt.Errorf("bubblewrap (%s) is not installed (not on PATH=%s nor in %s): "+
		"run 'apt-get install bubblewrap', then 'warren doctor'", name, os.Getenv("PATH"), strings.Join(systemBinDirs, ", "))
}
