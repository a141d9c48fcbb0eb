package sessions

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/sessions/workspace"
)

// decoyDir makes a directory outside every workspace holding a file whose
// content must never reach a session.
func decoyDir(t *testing.T) (dir, secret string) {
	t.Helper()
	dir = t.TempDir()
	secret = "decoy-" + NewID()
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, secret
}

// TestURLShapedSourcesNeverBecomePaths: a caller that may not use local
// sources passes "URLs" that a prefix test took for remote and path
// cleaning turned into host directories.
func TestURLShapedSourcesNeverBecomePaths(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	decoy, secret := decoyDir(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data})
	climb := strings.Repeat("/..", 40)
	for _, src := range []string{
		"https://.." + climb + decoy,
		"http://.." + climb + decoy,
		"ssh://.." + climb + decoy,
		"git://.." + climb + decoy,
		"git@x:" + climb + decoy,
		"git@x:/.." + climb + decoy,
		"https://../../../.." + data,
		"file://" + decoy,
		decoy,
	} {
		for _, mode := range []Mode{ModeBind, ModeClone, ""} {
			s, err := m.Create(ctx, "mallory", CreateOptions{Source: src, Mode: mode})
			if err == nil {
				_, _, ferr := m.OpenFiles(ctx, "mallory", s.ID, false)
				t.Errorf("source %q mode %q: created session %s on %s (file tools: %v)", src, mode, s.ID, s.Workspace, ferr)
				continue
			}
			if !errors.Is(err, workspace.ErrInvalid) {
				t.Errorf("source %q mode %q: %v, want a refusal (ErrInvalid)", src, mode, err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("source %q mode %q: the error shows the decoy's content", src, mode)
			}
		}
	}
	if list, _ := m.List(ctx, "mallory", true); len(list) != 0 {
		t.Errorf("refused sources left %d sessions", len(list))
	}
}

// TestBindResolvesLinksBeforeDeciding: a directory of one's own holding
// rootlink -> / must not lead the bind to /usr, nor the audit base to copy
// it; nor may a source be the data directory, inside it or hold it.
func TestBindResolvesLinksBeforeDeciding(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	m := newManager(t, openDB(t, data), Config{DataDir: data, AllowLocalSources: true})
	mine := t.TempDir()
	if err := os.Symlink("/", filepath.Join(mine, "rootlink")); err != nil {
		t.Fatal(err)
	}
	other, err := m.Create(ctx, "bob", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ src, want string }{
		{filepath.Join(mine, "rootlink", "usr", "share", "misc"), "/usr/share/misc is a system directory"},
		{filepath.Join(mine, "rootlink", "boot"), "/boot is a system directory"},
		{filepath.Join(mine, "rootlink", "usr", "share"), "/usr/share is a system directory"},
		{filepath.Join(mine, "rootlink"), "/ is a system directory"},
		{data, "data directory"},
		{filepath.Dir(data), "data directory"},
		{other.Workspace, "data directory"},
		{filepath.Join(mine, "rootlink") + data, "data directory"},
	} {
		for _, mode := range []Mode{ModeBind, ""} {
			s, err := m.Create(ctx, "alice", CreateOptions{Source: tc.src, Mode: mode})
			if err == nil {
				t.Errorf("bind %s: created session on %s", tc.src, s.Workspace)
				continue
			}
			if !errors.Is(err, workspace.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("bind %s: %v, want a refusal saying %q", tc.src, err, tc.want)
			}
		}
	}
	entries, _ := os.ReadDir(filepath.Join(data, "audit"))
	if len(entries) != 1 { // bob's session only
		t.Errorf("refused binds left %d audit repositories", len(entries))
	}
}

// TestStoredWorkspacesAreCheckedOnEveryUse: a row written by an older
// version (or by hand) naming a system directory (/usr/share: some
// images have no /etc) is refused by the file
// tools, commands and diffs, not only when a shell starts.
func TestStoredWorkspacesAreCheckedOnEveryUse(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	m := newManager(t, openDB(t, data), Config{DataDir: data, AllowLocalSources: true})
	mine := t.TempDir()
	os.Symlink("/", filepath.Join(mine, "rootlink"))
	rows := []*Session{
		{Meta: Meta{ID: NewID(), Owner: "alice", Mode: ModeBind, Source: "/usr/share"}, Workspace: "/usr/share"},
		{Meta: Meta{ID: NewID(), Owner: "alice", Mode: ModeBind, Source: "x"}, Workspace: filepath.Join(mine, "rootlink", "srv")},
		{Meta: Meta{ID: NewID(), Owner: "alice", Mode: ModeBind, Source: "x"}, Workspace: data},
		{Meta: Meta{ID: NewID(), Owner: "alice", Mode: ModeClone, Source: "x"}, Workspace: "/usr/share"},
		{Meta: Meta{ID: NewID(), Owner: "alice", Mode: ModeEmpty}, Workspace: mine},
	}
	for _, s := range rows {
		if err := m.Store().Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		for _, write := range []bool{false, true} {
			if _, _, err := m.OpenFiles(ctx, "alice", s.ID, write); err == nil {
				t.Errorf("%s session on %s: file tools (write %v) allowed", s.Mode, s.Workspace, write)
			}
		}
		if _, _, err := m.open(ctx, "alice", s.ID); err == nil {
			t.Errorf("%s session on %s: commands allowed", s.Mode, s.Workspace)
		}
		if _, err := m.Pause(ctx, "alice", s.ID); err == nil {
			t.Errorf("%s session on %s: pause (a snapshot) allowed", s.Mode, s.Workspace)
		}
		// Deleting stays possible, and never removes what is not warren's.
		if _, err := m.Delete(ctx, "alice", s.ID); err != nil && s.Mode == ModeBind {
			t.Errorf("delete %s: %v", s.ID, err)
		}
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("deleting a bad row removed %s", mine)
	}
}

// TestRemoteCallersCannotReachInternalAddresses: a caller without local
// sources makes the server fetch nothing from loopback, whatever the
// spelling, and learns nothing about what listens there.
func TestRemoteCallersCannotReachInternalAddresses(t *testing.T) {
	ctx := context.Background()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	data := t.TempDir()
	m := newManager(t, openDB(t, data), Config{DataDir: data})
	for _, src := range []string{
		"http://127.0.0.1:" + port + "/repo.git",
		"https://127.0.0.1:" + port + "/repo.git",
		"https://localhost:" + port + "/repo.git",
		"https://2130706433:" + port + "/repo.git",
		"https://0x7f000001:" + port + "/repo.git",
		"https://0177.0.0.1:" + port + "/repo.git",
		"https://127.1:" + port + "/repo.git",
		"https://[::ffff:127.0.0.1]:" + port + "/repo.git",
		"https://[::1]:" + port + "/repo.git",
		"git://127.0.0.1:" + port + "/repo.git",
		"ssh://git@127.0.0.1:" + port + "/repo.git",
		"https://169.254.169.254/latest/meta-data/",
		"https://100.64.0.1/x.git",
		"https://10.0.0.1/x.git",
	} {
		// A bound on each call: before the fix, git:// to an HTTP port hung.
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := m.Create(cctx, "mallory", CreateOptions{Source: src})
		cancel()
		if err == nil {
			t.Errorf("%s: cloned", src)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback server answered %d requests", n)
	}
}

// BenchmarkGuard is what every tool call now pays to re-check its session's
// workspace: go test -run X -bench Guard ./sessions/
func BenchmarkGuard(b *testing.B) {
	data, bound := b.TempDir(), b.TempDir()
	m := newManager(b, openDB(b, data), Config{DataDir: data, AllowLocalSources: true})
	for _, s := range []*Session{
		{Meta: Meta{ID: "s-bind", Mode: ModeBind}, Workspace: bound},
		{Meta: Meta{ID: "s-empty", Mode: ModeEmpty}, Workspace: m.workspaceDir("s-empty")},
	} {
		os.MkdirAll(s.Workspace, 0o755)
		b.Run(string(s.Mode), func(b *testing.B) {
			for b.Loop() {
				if err := m.guard(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
