package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// warrenCLI runs the binary with stdin and returns stdout, failing the
// test when it exits non-zero.
func warrenCLI(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(warrenBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("warren %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// createIdentity runs 'warren identity create' and returns the public key
// it prints last.
func createIdentity(t testing.TB, data, user, name string, extra ...string) string {
	t.Helper()
	out := warrenCLI(t, "", append([]string{"identity", "create", "--data-dir", data, "--user", user, "--name", name,
		"--author-name", "Ada Lovelace", "--author-email", "ada@example.org"}, extra...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "ssh-ed25519 ") {
		t.Fatalf("identity create: last line of stdout is %q, not an ssh-ed25519 public key", last)
	}
	return last
}

// TestIdentitiesCLIAndTool: identities made with the CLI are listed by
// 'identity ls' and identity_list for their owner only; an imported key
// asks its passphrase (on stdin here) and neither it nor the generated
// ones appear anywhere in the database file in the clear; rm removes.
func TestIdentitiesCLIAndTool(t *testing.T) {
	data := t.TempDir()
	pub := createIdentity(t, data, "alice", "work")
	if st, err := os.Stat(filepath.Join(data, "secret.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("server key file: %v, %v", st, err)
	}

	// An encrypted OpenSSH key, imported with its passphrase on stdin.
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "imported", []byte("correct horse"))
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "id_ed25519")
	os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600)
	importArgs := []string{"identity", "import", "--data-dir", data, "--user", "alice", "--name", "imported",
		"--author-name", "Ada", "--author-email", "ada@example.org", keyFile}
	bad := exec.Command(warrenBin, importArgs...)
	bad.Stdin = strings.NewReader("wrong\n")
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "passphrase does not open") {
		t.Fatalf("import with a wrong passphrase: %v %s", err, out)
	}
	out := warrenCLI(t, "correct horse\n", importArgs...)
	wantPub, _ := ssh.NewPublicKey(priv.Public())
	if !strings.HasPrefix(out, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(wantPub)))) {
		t.Fatalf("import printed %q, not the key's public key", out)
	}

	ls := warrenCLI(t, "", "identity", "ls", "--data-dir", data, "--user", "alice", "--json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(ls), &list); err != nil || len(list) != 2 {
		t.Fatalf("identity ls: %v %s", err, ls)
	}
	if got := warrenCLI(t, "", "identity", "ls", "--data-dir", data, "--user", "bob", "--json"); strings.TrimSpace(got) != "[]" {
		t.Fatalf("bob sees alice's identities: %s", got)
	}

	srv := serveHTTP(t, "--data-dir", data)
	alice := connectHTTP(t, srv, createToken(t, data, "alice"))
	bob := connectHTTP(t, srv, createToken(t, data, "bob"))
	res := alice.call("identity_list", map[string]any{})
	ids := structured(t, res)["identities"].([]any)
	if len(ids) != 2 || ids[1].(map[string]any)["public_key"] != pub {
		t.Fatalf("alice's identity_list: %v", ids)
	}
	raw, _ := json.Marshal(res)
	if bytes.Contains(raw, []byte("PRIVATE KEY")) {
		t.Fatalf("identity_list shows a private key: %s", raw)
	}
	if got := bob.ok("identity_list", map[string]any{}); len(got["identities"].([]any)) != 0 {
		t.Fatalf("bob's identity_list shows alice's: %v", got)
	}
	bob.fails("session_create", map[string]any{"source": "https://example.org/r.git", "identity": "work"},
		`bob has no identity named "work"`)

	// No private key material in the database, its WAL, or the server's files.
	seed := priv.Seed()
	for _, f := range []string{"warren.db", "warren.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(data, f))
		if bytes.Contains(b, seed) || bytes.Contains(b, []byte("PRIVATE KEY")) {
			t.Fatalf("%s holds private key material in the clear", f)
		}
	}

	warrenCLI(t, "", "identity", "rm", "--data-dir", data, "--user", "alice", "imported")
	if got := alice.ok("identity_list", map[string]any{}); len(got["identities"].([]any)) != 1 {
		t.Fatalf("after rm: %v", got)
	}
}
