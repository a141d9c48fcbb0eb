package main

import (
	"runtime/debug"
	"testing"
)

// Without -ldflags, the version comes from what the toolchain stamped.
func TestVersionFromBuildInfo(t *testing.T) {
	cases := []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-26T01:00:00Z"},
			{Key: "vcs.modified", Value: "true"}}}, "dev-0123456789ab+dirty (2026-11-26T01:00:00Z)"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, unversioned},
	}
	for _, c := range cases {
		if got := versionFrom(&c.bi); got != c.want {
			t.Errorf("versionFrom(%+v) = %q, want %q", c.bi.Main, got, c.want)
		}
	}
}
