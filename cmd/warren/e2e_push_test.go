package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/workspace/gittest"
)

// TestCloneEditPushOverSSH: a session cloned over ssh with a generated
// identity (sshd with the identity's key in authorized_keys, git-shell),
// edited in the jail, pushes one commit by the identity's author on top
// of the cloned commit to warren/<session>; a second push builds on the
// first; commits someone else pushed are never overwritten; the jail's
// .git/config (insteadOf, sshCommand, fsmonitor, hooks, alternates)
// changes nothing; and a changed host key is refused.
func TestCloneEditPushOverSSH(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	pub := createIdentity(t, data, sessions.LocalUser(), "work")
	sshd := startSSHD(t, pub)
	bare, git, first := bareRepo(t)

	// The server user's known_hosts (go-git reads $SSH_KNOWN_HOSTS first)
	// expects another key for this host, and an agent socket is set: an
	// identity's clone must use neither. (~/.ssh/config is read from the
	// passwd entry's home, which a test may not write: TestNoSSHConfig.)
	home := t.TempDir()
	knownHosts := filepath.Join(home, "known_hosts")
	os.WriteFile(knownHosts, []byte(fmt.Sprintf("[127.0.0.1]:%d %s", sshd.port, ssh.MarshalAuthorizedKey(newTestHostKey(t)))), 0o600)
	t.Setenv("SSH_KNOWN_HOSTS", knownHosts)
	t.Setenv("SSH_AUTH_SOCK", filepath.Join(home, "no-agent.sock"))
	var log syncBuffer
	c := serveStdioLogged(t, &log, "--data-dir", data)
	res := c.call("session_create", map[string]any{"source": sshd.url(bare), "identity": "work"})
	if res.IsError {
		t.Fatalf("session_create: %s", textOf(res))
	}
	if !strings.Contains(textOf(res), "is now pinned") || !strings.Contains(textOf(res), ssh.FingerprintSHA256(sshd.hostPub)) {
		t.Fatalf("first use of the host key is not shown: %s", textOf(res))
	}
	s := structured(t, res)
	id := s["session_id"].(string)
	if s["commit"] != first {
		t.Fatalf("cloned %v, want %s", s["commit"], first)
	}

	// Edit in the jail, and plant everything a hostile workspace could use
	// to redirect or run code in a git command on the host.
	evil := t.TempDir()
	r := c.exec(`printf 'made in the jail\n' > NEW.md && sed -i 's/upstream/the jail/' README.md && rm lib/util.go &&
mkdir -p docs && echo doc > docs/a.txt &&
git config --file .git/config url."file://`+evil+`/".insteadOf "ssh://" &&
git config --file .git/config core.sshCommand "touch `+evil+`/pwned-sshcommand" &&
git config --file .git/config core.fsmonitor "touch `+evil+`/pwned-fsmonitor" &&
mkdir -p .git/hooks && printf '#!/bin/sh\ntouch `+evil+`/pwned-hook\n' > .git/hooks/pre-push && chmod +x .git/hooks/pre-push &&
mkdir -p .git/objects/info && echo `+evil+` > .git/objects/info/alternates &&
mkdir -p sub/.git && echo junk > sub/.git/config && echo kept > sub/file && ln -s /etc/hostname hostlink && echo ok`, "session_id", id)
	if strings.TrimSpace(r["stdout"].(string)) != "ok" {
		t.Fatalf("edit in the jail: %v", r)
	}

	out := c.ok("session_push", map[string]any{"session_id": id, "message": "Do the work"})
	branch := "warren/" + id
	if out["branch"] != branch || out["parent"] != first || !strings.Contains(out["remote"].(string), "127.0.0.1") {
		t.Fatalf("session_push: %v", out)
	}
	commit := out["commit"].(string)
	if got := git("rev-parse", branch); got != commit {
		t.Fatalf("branch %s is at %s, the result says %s", branch, got, commit)
	}
	if n := git("rev-list", "--count", first+".."+branch); n != "1" {
		t.Fatalf("%s new commits on %s, want 1", n, branch)
	}
	if got := git("log", "-1", "--format=%an <%ae>|%cn <%ce>|%P|%s", branch); got != "Ada Lovelace <ada@example.org>|Ada Lovelace <ada@example.org>|"+first+"|Do the work" {
		t.Fatalf("pushed history: %q", got)
	}
	if got := git("show", branch+":NEW.md"); got != "made in the jail" {
		t.Fatalf("NEW.md: %q", got)
	}
	if got := git("show", branch+":README.md"); got != "hello from the jail" {
		t.Fatalf("README.md: %q", got)
	}
	files := git("ls-tree", "-r", "--name-only", branch)
	if files != "NEW.md\nREADME.md\ndocs/a.txt\nhostlink\nsub/file" {
		t.Fatalf("pushed tree:\n%s", files)
	}
	// A link is pushed as a link: its target, never the host file's content.
	if mode := strings.Fields(git("ls-tree", branch, "hostlink"))[0]; mode != "120000" || git("cat-file", "-p", branch+":hostlink") != "/etc/hostname" {
		t.Fatalf("hostlink pushed as mode %s: %q", mode, git("cat-file", "-p", branch+":hostlink"))
	}
	if got := git("rev-parse", "main"); got != first {
		t.Fatalf("main moved to %s", got)
	}
	for _, p := range []string{"pwned-sshcommand", "pwned-fsmonitor", "pwned-hook"} {
		if _, err := os.Stat(filepath.Join(evil, p)); err == nil {
			t.Fatalf("%s exists: the workspace's git config ran on the host", p)
		}
	}
	fsck := gittest.Git(t, bare)
	fsck("fsck", "--strict")

	// A second push builds on the first, as a fast-forward.
	c.exec("echo two >> NEW.md", "session_id", id)
	out2 := c.ok("session_push", map[string]any{"session_id": id})
	if out2["parent"] != commit || git("rev-parse", branch) != out2["commit"] {
		t.Fatalf("second push: %v", out2)
	}
	c.fails("session_push", map[string]any{"session_id": id}, "nothing to push")

	// Someone else pushes to the branch: warren refuses to overwrite it.
	other := t.TempDir()
	og := gittest.Git(t, other)
	og("clone", "-q", "-b", branch, bare, ".")
	gittest.Write(t, other, "theirs.txt", "not yours\n")
	og("add", "-A")
	og("commit", "-qm", "someone else")
	og("push", "-q", "origin", branch)
	theirs := og("rev-parse", "HEAD")
	c.exec("echo three >> NEW.md", "session_id", id)
	c.fails("session_push", map[string]any{"session_id": id}, "this session did not push")
	if git("rev-parse", branch) != theirs {
		t.Fatal("someone else's commit was overwritten")
	}
	// Another branch is fine.
	c.ok("session_push", map[string]any{"session_id": id, "branch": "feature/x"})
	if lines(git("log", "--format=%H", "feature/x"))[1] != first {
		t.Fatal("feature/x does not build on the cloned commit")
	}

	// The server's host key changes: refused, nothing pushed.
	sshd.restart(t)
	c.exec("echo four >> NEW.md", "session_id", id)
	c.fails("session_push", map[string]any{"session_id": id, "branch": "feature/x"}, "host key of 127.0.0.1")
	if n := len(lines(git("log", "--format=%H", "feature/x"))); n != 2 {
		t.Fatalf("feature/x has %d commits after a refused push", n)
	}
	c.fails("session_create", map[string]any{"source": sshd.url(bare), "identity": "work"}, "has changed")
	// What the error says to do: check the new key, forget the old one;
	// the next push pins the new key and says so.
	hostport := fmt.Sprintf("127.0.0.1:%d", sshd.port)
	warrenCLI(t, "", "identity", "forget-host", "--data-dir", data, "work", hostport)
	res3 := c.call("session_push", map[string]any{"session_id": id, "branch": "feature/x"})
	if res3.IsError || !strings.Contains(textOf(res3), "is now pinned") || !strings.Contains(textOf(res3), ssh.FingerprintSHA256(sshd.hostPub)) {
		t.Fatalf("push after forget-host: %s", textOf(res3))
	}
	if hosts := warrenCLI(t, "", "identity", "hosts", "--data-dir", data, "work"); !strings.Contains(hosts, ssh.FingerprintSHA256(sshd.hostPub)) {
		t.Fatalf("identity hosts: %s", hosts)
	}

	// The private key is nowhere in the clear: not in the log, a result,
	// the activity log, the database, the workspace, its home or the audit.
	watch, _ := json.Marshal([]any{res, out, out2, c.call("session_watch", map[string]any{"session_id": id})})
	if leaks := leaksOf(t, data, log.String(), watch, identitySeed(t, data, sessions.LocalUser(), "work")); len(leaks) > 0 {
		t.Fatalf("the identity's private key is in the clear in %v", leaks)
	}
}

// TestCloneEditPushOverHTTPS: the same with a token-only identity against
// git http-backend behind a local HTTPS server: the clone and the push log
// in with the token; a wrong token is refused; the token never appears in
// the server's log, a tool result, the activity log or the database.
func TestCloneEditPushOverHTTPS(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	const token = "tok_3f9a1c7e5d2b8a6f4e0c9b1d7a3e5f2c"
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte(token+"\n"), 0o600)
	out := warrenCLI(t, "", "identity", "create", "--data-dir", data, "--user", sessions.LocalUser(), "--name", "web",
		"--author-name", "Grace Hopper", "--author-email", "grace@example.org", "--no-key", "--token-file", tokenFile)
	if strings.Contains(out, token) {
		t.Fatal("identity create printed the token")
	}
	bare, git, first := bareRepo(t)
	git("config", "http.receivepack", "true")
	base, cert := gitHTTPS(t, filepath.Dir(filepath.Dir(bare)), token)
	t.Setenv("SSL_CERT_FILE", cert)
	var log syncBuffer
	c := serveStdioLogged(t, &log, "--data-dir", data)

	src := base + "/org/repo.git"
	c.fails("session_create", map[string]any{"source": src}, "authentication")
	wrong := filepath.Join(t.TempDir(), "wrong")
	os.WriteFile(wrong, []byte("tok_not_the_right_one"), 0o600)
	warrenCLI(t, "", "identity", "create", "--data-dir", data, "--user", sessions.LocalUser(), "--name", "wrong",
		"--author-name", "G", "--author-email", "g@example.org", "--no-key", "--token-file", wrong)
	c.fails("session_create", map[string]any{"source": src, "identity": "wrong"}, "refused the identity's key or token")
	s := c.ok("session_create", map[string]any{"source": src, "identity": "web", "name": "https work"})
	id := s["session_id"].(string)
	c.exec("echo 'over https' > https.txt && git config --file .git/config credential.helper '!echo password=stolen' && echo ok", "session_id", id)
	res := c.call("session_push", map[string]any{"session_id": id, "branch": "topic"})
	if res.IsError {
		t.Fatalf("session_push: %s", textOf(res))
	}
	pushed := structured(t, res)
	if git("rev-parse", "topic") != pushed["commit"] || pushed["parent"] != first {
		t.Fatalf("push result %v, topic at %s", pushed, git("rev-parse", "topic"))
	}
	if got := git("log", "-1", "--format=%an <%ae>", "topic"); got != "Grace Hopper <grace@example.org>" {
		t.Fatalf("author %q", got)
	}
	if got := git("show", "topic:https.txt"); got != "over https" {
		t.Fatalf("https.txt: %q", got)
	}
	// Another user, over HTTP on the same data: cannot push the session,
	// nor see or use the identity.
	srv := serveHTTP(t, "--data-dir", data)
	bob := connectHTTP(t, srv, createToken(t, data, "bob"))
	bob.fails("session_push", map[string]any{"session_id": id, "branch": "bob"}, "not found")
	bob.fails("session_push", map[string]any{"session_id": id, "identity": "web"}, "not found")
	if got := bob.ok("identity_list", map[string]any{}); len(got["identities"].([]any)) != 0 {
		t.Fatalf("bob lists %v", got)
	}
	bob.fails("session_create", map[string]any{"source": src, "identity": "web"}, `no identity named "web"`)
	if _, err := exec.Command("git", "-C", bare, "rev-parse", "--verify", "-q", "refs/heads/bob").Output(); err == nil {
		t.Fatal("bob pushed a branch")
	}

	// The CLI pushes too, with the identity the session was made with.
	c.exec("echo cli >> https.txt", "session_id", id)
	cli := warrenCLI(t, "", "session", "push", "--data-dir", data, "--branch", "topic", "--json", id)
	var viaCLI map[string]any
	if err := json.Unmarshal([]byte(cli), &viaCLI); err != nil || viaCLI["parent"] != pushed["commit"] ||
		git("rev-parse", "topic") != viaCLI["commit"] {
		t.Fatalf("warren session push: %v %s", err, cli)
	}

	watch := c.call("session_watch", map[string]any{"session_id": id})
	raw, _ := json.Marshal([]any{res, watch, s})
	for what, text := range map[string]string{"the server's log": log.String(), "a tool result or the activity log": string(raw)} {
		if strings.Contains(text, token) {
			t.Fatalf("the token appears in %s", what)
		}
	}
	for _, f := range []string{"warren.db", "warren.db-wal"} {
		if b, _ := os.ReadFile(filepath.Join(data, f)); bytes.Contains(b, []byte(token)) {
			t.Fatalf("%s holds the token in the clear", f)
		}
	}
	for _, dir := range []string{"audit", "workspaces", "homes"} {
		filepath.WalkDir(filepath.Join(data, dir), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(token)) {
					t.Errorf("%s holds the token", p)
				}
			}
			return nil
		})
	}

	// Deleting the session forgets its identity link and pushes.
	if n := pushRows(t, data, id); n != 3 {
		t.Fatalf("%d rows of the session's pushes and identity, want 3", n)
	}
	c.ok("session_control", map[string]any{"session_id": id, "action": "delete"})
	if n := pushRows(t, data, id); n != 0 {
		t.Fatalf("%d rows of a deleted session's pushes remain", n)
	}
}

// pushRows counts the rows gitpush keeps of a session.
func pushRows(t *testing.T, data, id string) int {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(data, "warren.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT (SELECT COUNT(*) FROM git_pushes WHERE session_id = ?) +
		(SELECT COUNT(*) FROM git_session_identities WHERE session_id = ?)`, id, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPushOpensPullRequest: session_push with pull_request opens one
// through the forge's REST API (a fake GitHub API of this test: the real
// one cannot be reached here) with the identity's token, returns its URL,
// and task_update done links the task to it without being told.
func TestPushOpensPullRequest(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	const token = "ghp_fakeTokenForTheFakeGitHub0123456789"
	type prCall struct {
		Auth, Path string
		Body       map[string]string
	}
	calls := make(chan prCall, 4)
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		json.NewDecoder(r.Body).Decode(&body)
		calls <- prCall{Auth: r.Header.Get("Authorization"), Path: r.Method + " " + r.URL.Path, Body: body}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"number": 7, "html_url": "https://github.example/org/repo/pull/7"}`)
	}))
	defer api.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte(token), 0o600)
	warrenCLI(t, "", "identity", "create", "--data-dir", data, "--user", sessions.LocalUser(), "--name", "gh",
		"--author-name", "Grace Hopper", "--author-email", "grace@example.org", "--no-key", "--token-file", tokenFile,
		"--forge-url", api.URL)
	bare, git, _ := bareRepo(t)
	git("config", "http.receivepack", "true")
	// The repository's default branch is trunk: the pull request merges there.
	git("branch", "-m", "main", "trunk")
	base, cert := gitHTTPS(t, filepath.Dir(filepath.Dir(bare)), token)
	t.Setenv("SSL_CERT_FILE", cert) // httptest's TLS servers share one certificate

	c := serveStdio(t, "--data-dir", data)
	id := c.ok("session_create", map[string]any{"source": base + "/org/repo.git", "identity": "gh"})["session_id"].(string)
	task := c.ok("task_add", map[string]any{"title": "Write the greeting"})["task"].(map[string]any)["id"].(string)
	c.ok("task_claim", map[string]any{"task_id": task, "session_id": id})
	c.exec("echo hi > greeting.txt", "session_id", id)
	out := c.ok("session_push", map[string]any{"session_id": id, "branch": "greeting",
		"pull_request": map[string]any{"title": "Add a greeting", "body": "Made in warren."}})
	if out["pull_request"] != "https://github.example/org/repo/pull/7" {
		t.Fatalf("session_push: %v", out)
	}
	got := <-calls
	want := prCall{Auth: "Bearer " + token, Path: "POST /repos/org/repo/pulls",
		Body: map[string]string{"head": "greeting", "base": "trunk", "title": "Add a greeting", "body": "Made in warren."}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the forge got %+v, want %+v", got, want)
	}
	if git("show", "greeting:greeting.txt") != "hi" {
		t.Fatal("the branch was not pushed")
	}
	done := c.ok("task_update", map[string]any{"task_id": task, "status": "done", "session_id": id})
	if link := done["task"].(map[string]any)["link"]; link != "https://github.example/org/repo/pull/7" {
		t.Fatalf("task_update done linked %v, not the pull request", link)
	}
}

// TestIdentitySSHOverHTTPReachesPublicHostsOnly: over HTTP with tokens, a
// clone over ssh with the caller's identity is allowed (the identity's
// key logs in, not the server's), and held to the same rule as https: the
// address dialed must be public, so an sshd on loopback is refused as
// such, without its key ever being offered.
func TestIdentitySSHOverHTTPReachesPublicHostsOnly(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	pub := createIdentity(t, data, "alice", "work")
	sshd := startSSHD(t, pub)
	bare, _, _ := bareRepo(t)
	srv := serveHTTP(t, "--data-dir", data)
	alice := connectHTTP(t, srv, createToken(t, data, "alice"))
	alice.fails("session_create", map[string]any{"source": sshd.url(bare), "identity": "work"},
		"does not resolve to a public internet address")
	hosts := warrenCLI(t, "", "identity", "hosts", "--data-dir", data, "--user", "alice", "work")
	if strings.TrimSpace(hosts) != "" {
		t.Fatalf("a host key was pinned, so the loopback sshd was reached: %s", hosts)
	}
	// Without an identity, ssh stays the operator's.
	alice.fails("session_create", map[string]any{"source": sshd.url(bare)}, "ssh URLs are not accepted")
}
