package main

import (
	"bytes"
	"compress/zlib"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJailRacingSymlinksGetsNoHostFileIntoTheAudit: a process in the jail
// keeps rotating a file and a directory with symlinks to a root-only host
// file and directory, and puts a FIFO where .gitignore goes, while the
// server diffs over MCP and pauses (a snapshot). The host file's content
// must reach no result and no object of the audit repository.
func TestJailRacingSymlinksGetsNoHostFileIntoTheAudit(t *testing.T) {
	needJail(t)
	b := make([]byte, 12)
	rand.Read(b)
	secret := "DECOY-" + hex.EncodeToString(b)
	host := filepath.Join(t.TempDir(), "host-secrets") // t.TempDir's parent is 0700: out of the jail's reach
	if err := os.Mkdir(host, 0o700); err != nil {
		t.Fatal(err)
	}
	shadow := filepath.Join(host, "shadow")
	if err := os.WriteFile(shadow, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := jailDir(t)
	c := serveStdio(t, "--data-dir", data)
	id := c.ok("session_create", map[string]any{})["session_id"].(string)
	c.exec("true", "session_id", id) // starts the jail, which makes its $HOME
	// The swapper goes in the session's $HOME, out of the audited workspace.
	swapper := filepath.Join(data, "homes", id, "swapper")
	if out, err := exec.Command("go", "build", "-o", swapper, "./testdata/swapper").CombinedOutput(); err != nil {
		t.Fatalf("build the swapper: %v\n%s", err, out)
	}
	setup := "mkfifo .gitignore && echo innocent > victim && ln -s " + shadow + " victim-alt && " +
		"mkdir vdir && echo innocent > vdir/inner && ln -s " + host + " vdir-alt && " +
		"($HOME/swapper victim victim-alt vdir vdir-alt >/dev/null 2>&1 &)"
	if r := c.exec(setup, "session_id", id); r["exit_code"] != float64(0) {
		t.Fatalf("setup in the jail: %v", r)
	}
	calls, asLink, asFile := 0, 0, 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); calls++ {
		res := c.call("session_diff", map[string]any{"session_id": id})
		out, _ := json.Marshal(res)
		if strings.Contains(string(out), secret) {
			t.Fatalf("diff %d returned the host file's content: %s", calls, out)
		}
		if strings.Contains(string(out), `+++ b/victim\n@@ -0,0 +1 @@\n+`+shadow) {
			asLink++
		}
		if strings.Contains(string(out), `+++ b/victim\n@@ -0,0 +1 @@\n+innocent`) {
			asFile++
		}
	}
	t.Logf("%d diffs while the jail raced: victim seen %d times as a link, %d as a file", calls, asLink, asFile)
	if asLink == 0 || asFile == 0 {
		t.Fatal("the jail's swaps never showed: the race did not run")
	}
	if st := c.ok("session_control", map[string]any{"session_id": id, "action": "pause"})["state"]; st != "paused" {
		t.Fatalf("pause: state %v", st)
	}
	// Every object of the audit repository, inflated.
	objects := 0
	err := filepath.WalkDir(filepath.Join(data, "audit", id+".git", "objects"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, "/pack/") {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		zr, err := zlib.NewReader(bytes.NewReader(raw))
		if err != nil {
			return err
		}
		content, err := io.ReadAll(zr)
		if err != nil {
			return err
		}
		objects++
		if bytes.Contains(content, []byte(secret)) {
			t.Errorf("audit object %s holds the host file's content", p)
		}
		return nil
	})
	if err != nil || objects == 0 {
		t.Fatalf("scan the audit repository: %d objects, %v", objects, err)
	}
	if st, err := os.Stat(shadow); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the host file changed: %v %v", st, err)
	}
}
