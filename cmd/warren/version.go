package main

import (
	"runtime/debug"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=..."; when it
// is not, buildVersion reads what the Go toolchain stamped into the binary.
var version = ""

// buildVersion says which warren this is: the module version for
// `go install …@v1.2.3`, otherwise the git commit the binary was built from
// (with "+dirty" when the tree had uncommitted changes), and "dev" with how
// to get a real version only when the toolchain recorded neither (go run,
// a build outside a git checkout, or GOFLAGS=-buildvcs=false, which some
// machines set in their go env).
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return unversioned
	}
	return versionFrom(bi)
}

// unversioned is the version of a binary built with no version control
// information: it says so, and how to build one that names its commit.
const unversioned = "dev (built without version control information: 'just build', or 'go build -buildvcs=true' in a git checkout, names the commit)"

func versionFrom(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, when string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return unversioned
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "dev-" + rev
	if dirty {
		v += "+dirty"
	}
	if when != "" {
		v += " (" + strings.TrimSuffix(when, "Z") + "Z)"
	}
	return v
}
