package workspace

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/sessions/workspace/gittest"
)

func TestParseSource(t *testing.T) {
	for _, tc := range []struct {
		raw         string
		url, path   string // what it parses to
		errContains string
	}{
		{raw: "https://github.com/a/b.git", url: "https://github.com/a/b.git"},
		{raw: "HTTPS://github.com/a/b", url: "https://github.com/a/b"},
		{raw: "ssh://git@github.com/a/b.git", url: "ssh://git@github.com/a/b.git"},
		{raw: "git@github.com:a/b.git", url: "ssh://git@github.com/a/b.git"},
		{raw: "host:repo", url: "ssh://host/repo"},
		{raw: "git://example.org:9418/x", url: "git://example.org:9418/x"},
		{raw: "https://[2001:4860::1]/x", url: "https://[2001:4860::1]/x"},
		{raw: "file:///srv/repo", path: "/srv/repo"},
		{raw: "file://localhost/srv/repo", path: "/srv/repo"},
		{raw: "/srv/repo", path: "/srv/repo"},
		{raw: "rel/dir", path: "rel/dir"},
		{raw: "./a:b", path: "./a:b"},
		{raw: "/tmp/a:b", path: "/tmp/a:b"},
		// URL-shaped paths are URLs, and bad ones.
		{raw: "https://../../../../etc", errContains: "not a valid host name"},
		{raw: "http://../x", errContains: "not a valid host name"},
		{raw: "ssh://..", errContains: "not a valid host name"},
		{raw: "git://../../..", errContains: "not a valid host name"},
		{raw: "git@x:/../..", url: "ssh://git@x/../.."},
		{raw: "git@..:/etc", errContains: "not a valid host name"},
		{raw: "https:///etc", errContains: "no host"},
		{raw: "https://a..b/x", errContains: "not a valid host name"},
		{raw: "ftp://example.org/x", errContains: "not supported"},
		{raw: "file://host/etc", errContains: "names a path of this host"},
		{raw: "file://etc", errContains: "names a path of this host"},
		{raw: "https://example.org/x?y=1", errContains: "no query"},
		{raw: "https://u:pw@example.org/x", errContains: "password"},
		{raw: "https://example.org:0/x", errContains: "not a port"},
		{raw: "https://example.org:99999/x", errContains: "not a port"},
		{raw: "https://exa mple.org/x", errContains: "not a valid URL"},
		{raw: "https://example.org/\x00", errContains: "control character"},
		// Addresses in notations a C resolver reads differently.
		{raw: "https://2130706433/x", errContains: "non-standard notation"},
		{raw: "https://0x7f000001/x", errContains: "non-standard notation"},
		{raw: "https://0177.0.0.1/x", errContains: "non-standard notation"},
		{raw: "https://127.1/x", errContains: "non-standard notation"},
		{raw: "https://0x7f.0.0.1/x", errContains: "non-standard notation"},
		{raw: "https://127.0.0.1/x", url: "https://127.0.0.1/x"}, // canonical: the dialer decides
		{raw: "https://[fe80::1%25eth0]/x", errContains: "not an IPv6 address"},
	} {
		src, err := ParseSource(tc.raw)
		switch {
		case tc.errContains != "":
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.errContains) {
				t.Errorf("ParseSource(%q) = %+v, %v; want an error containing %q", tc.raw, src, err, tc.errContains)
			}
		case err != nil:
			t.Errorf("ParseSource(%q): %v", tc.raw, err)
		case tc.url != "":
			if src.URL == nil || src.URL.String() != tc.url || src.Local() {
				t.Errorf("ParseSource(%q) = %+v, want URL %s", tc.raw, src, tc.url)
			}
		default:
			if !src.Local() || src.Path != tc.path {
				t.Errorf("ParseSource(%q) = %+v, want path %s", tc.raw, src, tc.path)
			}
		}
	}
}

func TestPolicyDecidesSchemesAndModes(t *testing.T) {
	remote, local, operatorHTTP := Policy{}, Policy{Local: true}, Policy{Local: true, Trusted: true}
	for _, tc := range []struct {
		raw  string
		mode Mode
		p    Policy
		want string // "" means allowed
	}{
		{"https://github.com/a/b", Clone, remote, ""},
		{"https://github.com/a/b", "", remote, ""},
		{"https://github.com/a/b", Bind, operatorHTTP, "a URL"},
		{"git@github.com:a/b", Bind, operatorHTTP, "a URL"},
		{"http://github.com/a/b", Clone, remote, "use the repository's https URL"},
		{"git://github.com/a/b", Clone, remote, "use the repository's https URL"},
		{"ssh://git@github.com/a/b", Clone, remote, "server's own ssh keys"},
		{"git@github.com:a/b", Clone, remote, "server's own ssh keys"},
		{"git@github.com:a/b", Clone, local, "server's own ssh keys"},
		{"git@github.com:a/b", Clone, operatorHTTP, ""},
		{"/srv/x", Bind, remote, "--allow-local-sources"},
		{"file:///srv/x", Clone, remote, "--allow-local-sources"},
		{"/srv/x", Bind, local, ""},
	} {
		src, err := ParseSource(tc.raw)
		if err != nil {
			t.Fatal(err)
		}
		err = tc.p.check(src, tc.mode)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: check(%s, %q) = %v, want %q", tc.p, tc.raw, tc.mode, err, tc.want)
		}
	}
}

func TestSystemDirs(t *testing.T) {
	for dir, refused := range map[string]bool{
		"/": true, "/tmp": true, "/home": true, "/srv": true, "/opt": true, "/work": true,
		"/etc": true, "/etc/ssl": true, "/usr/share/doc": true, "/var/lib/warren": true, "/root/x": true,
		"/proc/1": true, "/run/user/0": true, "/lib64/x": true, "/boot/efi": true,
		"/tmp/x": false, "/home/alice/src": false, "/srv/git/repo": false, "/opt/project": false,
		"/usrlocal/x": false, "/etcetera/x": false,
	} {
		if got := systemDir(dir) != ""; got != refused {
			t.Errorf("systemDir(%s) = %v, want %v", dir, got, refused)
		}
	}
}

// TestLocalCloneRunsInProcess: a repository another uid owns (one made in
// a jail, say) clones with no git on the PATH: nothing runs
// git-upload-pack, and git's ownership check has nothing to refuse.
func TestLocalCloneRunsInProcess(t *testing.T) {
	src, first, second := gitRepo(t)
	if out, err := exec.Command("chown", "-R", "12345:12345", src).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	t.Setenv("PATH", "/nonexistent")
	for _, tc := range []struct{ source, ref, want string }{
		{src, "", second},
		{"file://" + src, "", second},
		{src, "v1", first},
		{src, first[:8], first},
	} {
		dir := filepath.Join(t.TempDir(), "ws")
		p, err := Prepare(context.Background(), Spec{Source: tc.source, Ref: tc.ref, Dir: dir, Policy: operator})
		if err != nil {
			t.Errorf("clone %s at %q: %v", tc.source, tc.ref, err)
			continue
		}
		if p.Commit != tc.want || p.Source != tc.source {
			t.Errorf("clone %s at %q: %+v, want commit %s", tc.source, tc.ref, p, tc.want)
		}
	}
	// A missing ref is named as such, since the repository was reached.
	_, err := Prepare(context.Background(), Spec{Source: src, Ref: "nope", Dir: filepath.Join(t.TempDir(), "ws"), Policy: operator})
	if err == nil || !strings.Contains(err.Error(), `ref "nope" is not a branch, tag or commit`) {
		t.Errorf("missing ref: %v", err)
	}
}

// TestLocalCloneStaysInsideTheRepository: a source repository (which a
// jail may have made) whose alternates name another repository on the
// host does not get that repository's objects cloned.
func TestLocalCloneStaysInsideTheRepository(t *testing.T) {
	src, _, _ := gitRepo(t)
	victim := t.TempDir()
	secret := "decoy-" + filepath.Base(victim)
	git := gittest.Git(t, victim)
	git("init", "-q", "-b", "main")
	write(t, victim, "secret.txt", secret+"\n")
	git("add", "-A")
	git("commit", "-q", "-m", "private")
	stolen := git("rev-parse", "HEAD")
	write(t, filepath.Join(src, ".git", "objects", "info"), "alternates", filepath.Join(victim, ".git", "objects")+"\n")
	write(t, filepath.Join(src, ".git", "refs", "heads"), "stolen", stolen+"\n")
	for _, ref := range []string{"stolen", stolen} {
		dir := filepath.Join(t.TempDir(), "ws")
		_, err := Prepare(context.Background(), Spec{Source: src, Ref: ref, Dir: dir, Policy: operator})
		if b, rerr := os.ReadFile(filepath.Join(dir, "secret.txt")); rerr == nil {
			t.Errorf("ref %s: the clone holds another repository's file: %q (err %v)", ref, b, err)
		}
		if err == nil {
			t.Errorf("ref %s: cloned through alternates outside the repository", ref)
		} else if strings.Contains(err.Error(), secret) {
			t.Errorf("ref %s: the error shows the other repository: %v", ref, err)
		}
	}
}
