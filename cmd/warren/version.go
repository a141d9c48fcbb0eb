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
// (with "+dirty" when the tree had uncommitted changes), and "dev" only when
// the toolchain recorded neither (go run, or -buildvcs=false).
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return versionFrom(bi)
}

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
		return "dev"
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
