package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/warrenhq/warren/sessions"
)

// Sources a token holder names must not open the host: URL-shaped paths,
// links to system directories, internal addresses.

// dataDecoy puts a file in the data directory whose content must never
// reach a session.
func dataDecoy(t *testing.T, data string) string {
	t.Helper()
	secret := "decoy-" + sessions.NewID()
	if err := os.WriteFile(filepath.Join(data, "decoy.txt"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	return secret
}

func TestHTTPURLShapedSourcesAreRefused(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	secret := dataDecoy(t, data)
	tok := createToken(t, data, "mallory")
	climb := strings.Repeat("/..", 30)
	for _, extra := range [][]string{nil, {"--allow-local-sources"}} {
		srv := serveHTTP(t, append([]string{"--data-dir", data}, extra...)...)
		c := connectHTTP(t, srv, tok)
		for _, src := range []string{
			"https://.." + climb + data,
			"https://../../../.." + data,
			"http://.." + climb + data,
			"ssh://.." + climb + data,
			"git://.." + climb + data,
			"git@x:" + climb + data,
			"git@x:/.." + climb + data,
			"file://" + data,
			data,
			filepath.Dir(data),
			filepath.Join(data, "workspaces"),
		} {
			for _, mode := range []string{"bind", "clone", ""} {
				args := map[string]any{"source": src}
				if mode != "" {
					args["mode"] = mode
				}
				res := c.call("session_create", args)
				text := textOf(res)
				if !res.IsError {
					got := c.call("read_file", map[string]any{"session_id": structured(t, res)["session_id"], "path": "decoy.txt"})
					t.Errorf("%v: session_create %q mode %q succeeded; read_file decoy.txt: %s", extra, src, mode, textOf(got))
					continue
				}
				if strings.Contains(text, secret) {
					t.Errorf("%v: session_create %q mode %q: the error shows the decoy", extra, src, mode)
				}
			}
		}
		if l := c.ok("session_list", map[string]any{"include_deleted": true}); len(l["sessions"].([]any)) != 0 {
			t.Errorf("%v: refused sources left sessions: %v", extra, l)
		}
	}
}

// TestHTTPClonesReachNoInternalAddress: a token holder cannot make the
// server fetch from loopback, link-local or private addresses in any
// spelling, nor tell an open port from a closed one.
func TestHTTPClonesReachNoInternalAddress(t *testing.T) {
	needJail(t)
	var hits atomic.Int64
	open := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer open.Close()
	openTLS := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer openTLS.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	portOf := func(u string) string { return u[strings.LastIndex(u, ":")+1:] }
	data := jailDir(t)
	srv := serveHTTP(t, "--data-dir", data)
	c := connectHTTP(t, srv, createToken(t, data, "mallory"))
	errs := map[string]string{}
	for _, host := range []string{"127.0.0.1", "localhost", "2130706433", "0x7f000001", "0177.0.0.1", "127.1",
		"[::1]", "[::ffff:127.0.0.1]", "169.254.169.254", "100.64.0.1", "10.0.0.1", "0.0.0.0"} {
		for _, port := range []string{portOf(open.URL), portOf(openTLS.URL), portOf(closed.URL)} {
			for _, scheme := range []string{"https", "http", "git", "ssh"} {
				src := scheme + "://" + host + ":" + port + "/repo.git"
				res := c.call("session_create", map[string]any{"source": src})
				if !res.IsError {
					t.Errorf("%s: cloned", src)
					continue
				}
				msg := strings.ReplaceAll(textOf(res), port, "PORT")
				key := scheme + "://" + host
				if prev, ok := errs[key]; ok && prev != msg {
					t.Errorf("%s: errors differ between ports:\n%s\n%s", key, prev, msg)
				}
				errs[key] = msg
			}
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback servers answered %d requests", n)
	}
	for _, want := range []struct{ key, text string }{
		{"https://localhost", "public internet address"},
		{"ssh://127.0.0.1", "server's own ssh keys"},
		{"http://127.0.0.1", "https URL"},
	} {
		if !strings.Contains(errs[want.key], want.text) {
			t.Errorf("%s: %q does not say %q", want.key, errs[want.key], want.text)
		}
	}
}

// TestBindThroughALinkToASystemDirIsRefused: the jail makes rootlink -> /
// in its bound workspace; binding <ws>/rootlink/usr/share/misc (or / itself)
// is refused, and nothing of it is copied into an audit repository.
func TestBindThroughALinkToASystemDirIsRefused(t *testing.T) {
	needJail(t)
	ws, data := jailDir(t), jailDir(t)
	c := serveStdio(t, "--workspace", ws, "--data-dir", data)
	c.exec("ln -s / rootlink")
	before, _ := os.ReadDir(filepath.Join(data, "audit"))
	for _, src := range []string{filepath.Join(ws, "rootlink", "usr", "share", "misc"), filepath.Join(ws, "rootlink")} {
		for _, mode := range []string{"bind", ""} {
			args := map[string]any{"source": src}
			if mode != "" {
				args["mode"] = mode
			}
			c.fails("session_create", args, "is a system directory")
		}
	}
	after, _ := os.ReadDir(filepath.Join(data, "audit"))
	if len(after) != len(before) {
		t.Errorf("refused binds made %d audit repositories", len(after)-len(before))
	}
}

// TestAStoredSystemWorkspaceIsRefusedByEveryTool: a session row naming a
// system directory, as an older version could have stored, is refused by
// the file tools and the shell alike.
func TestAStoredSystemWorkspaceIsRefusedByEveryTool(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	ctx := context.Background()
	db, err := openDB(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	store, err := sessions.NewStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	id := sessions.NewID()
	row := &sessions.Session{Meta: sessions.Meta{ID: id, Owner: sessions.LocalUser(), Mode: sessions.ModeBind,
		Source: "/usr/share"}, Workspace: "/usr/share"}
	if err := store.Create(ctx, row); err != nil {
		t.Fatal(err)
	}
	db.Close()
	name := "warren-e2e-" + id
	t.Cleanup(func() { os.Remove(filepath.Join("/usr/share", name)) })

	c := serveStdio(t, "--data-dir", data)
	c.fails("read_file", map[string]any{"session_id": id, "path": "misc/magic"}, "system directory")
	c.fails("write_file", map[string]any{"session_id": id, "path": name, "content": "x"}, "system directory")
	c.fails("edit_file", map[string]any{"session_id": id, "path": "misc/magic", "old_text": "a", "new_text": "b"}, "system directory")
	c.fails("shell_exec", map[string]any{"session_id": id, "command": "ls"}, "system directory")
	c.fails("session_diff", map[string]any{"session_id": id}, "system directory")
	if _, err := os.Stat(filepath.Join("/usr/share", name)); err == nil {
		t.Errorf("write_file created /usr/share/%s", name)
	}
	// The session can still be deleted, and /usr/share stays.
	c.ok("session_control", map[string]any{"session_id": id, "action": "delete"})
	if _, err := os.Stat("/usr/share/misc"); err != nil {
		t.Fatalf("deleting the session removed /usr/share/misc: %v", err)
	}
}
