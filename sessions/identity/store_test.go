package identity

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/ncruces/go-sqlite3/driver"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/warrenhq/warren/sessions/errs"
)

func openTest(t *testing.T) (*Store, *sql.DB, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "warren.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)&_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	seal, err := LoadKey(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), db, seal)
	if err != nil {
		t.Fatal(err)
	}
	return s, db, dir
}

func alice(name string) Options {
	return Options{Owner: "alice", Name: name, AuthorName: "Alice Doe", AuthorEmail: "alice@example.org"}
}

// The private key never reaches a column in the clear, the server key file
// is made 0600, and the sealed key opens back to a signer of the public key.
func TestCreateSealsKey(t *testing.T) {
	s, db, dir := openTest(t)
	ctx := context.Background()
	opts := alice("work")
	opts.Token = "ghp_secrettokenvalue123"
	id, err := s.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id.PublicKey, "ssh-ed25519 ") {
		t.Fatalf("public key %q", id.PublicKey)
	}
	st, err := os.Stat(filepath.Join(dir, KeyFileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	sec, err := s.Open(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if string(sec.Signer.PublicKey().Marshal()) != string(mustPub(t, id.PublicKey).Marshal()) || sec.Token != opts.Token {
		t.Fatal("opened secrets do not match")
	}
	// Every column of every row, as text: no key material, no token.
	priv := sec.Signer
	_ = priv
	raw := dumpDB(t, db)
	for _, bad := range []string{"OPENSSH PRIVATE KEY", opts.Token, "ghp_"} {
		if strings.Contains(raw, bad) {
			t.Fatalf("database holds %q in the clear", bad)
		}
	}
	// Another server key does not open it.
	other, _ := NewSealer(make([]byte, 32))
	s2 := &Store{db: db, seal: other, Now: s.Now}
	if _, err := s2.Open(ctx, id); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("other key: %v", err)
	}
}

func mustPub(t *testing.T, line string) ssh.PublicKey {
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func dumpDB(t *testing.T, db *sql.DB) string {
	var b strings.Builder
	for _, table := range []string{"git_identities", "git_known_hosts"} {
		rows, err := db.Query("SELECT * FROM " + table)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			rows.Scan(ptrs...)
			for _, v := range vals {
				switch x := v.(type) {
				case string:
					b.WriteString(x)
				case []byte:
					b.Write(x)
				}
				b.WriteByte('\n')
			}
		}
		rows.Close()
	}
	return b.String()
}

// One user's identities are invisible to another: not listed, not found,
// not removable.
func TestIdentitiesPerUser(t *testing.T) {
	s, _, _ := openTest(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, alice("work")); err != nil {
		t.Fatal(err)
	}
	if l, err := s.List(ctx, "bob"); err != nil || len(l) != 0 {
		t.Fatalf("bob lists %v %v", l, err)
	}
	if _, err := s.Get(ctx, "bob", "work"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("bob gets: %v", err)
	}
	if err := s.Remove(ctx, "bob", "work"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("bob removes: %v", err)
	}
	if _, err := s.Create(ctx, alice("work")); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("duplicate: %v", err)
	}
	if l, _ := s.List(ctx, "alice"); len(l) != 1 {
		t.Fatalf("alice lists %v", l)
	}
	if err := s.Remove(ctx, "alice", "work"); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.List(ctx, "alice"); len(l) != 0 {
		t.Fatalf("after rm: %v", l)
	}
}

// An imported key protected by a passphrase needs it, refuses a wrong one,
// and is kept sealed without it.
func TestImportPassphrase(t *testing.T) {
	s, _, _ := openTest(t)
	ctx := context.Background()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "c", []byte("open sesame"))
	if err != nil {
		t.Fatal(err)
	}
	pemBytes := pem.EncodeToMemory(block)
	if _, err := s.Import(ctx, alice("imp"), pemBytes, nil); !errors.Is(err, ErrPassphrase) {
		t.Fatalf("no passphrase: %v", err)
	}
	if _, err := s.Import(ctx, alice("imp"), pemBytes, []byte("wrong")); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("wrong passphrase: %v", err)
	}
	id, err := s.Import(ctx, alice("imp"), pemBytes, []byte("open sesame"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ssh.NewPublicKey(priv.Public())
	if string(mustPub(t, id.PublicKey).Marshal()) != string(want.Marshal()) {
		t.Fatal("imported public key differs")
	}
	if _, err := s.Import(ctx, alice("junk"), []byte("not a key"), nil); errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("junk: %v", err)
	}
}

// A host key is pinned on first use (and said so); the same key passes;
// another key for the same host is refused with ErrHostKeyChanged; other
// identities pin their own.
func TestHostKeyPinning(t *testing.T) {
	s, _, _ := openTest(t)
	ctx := context.Background()
	id, _ := s.Create(ctx, alice("work"))
	var notes []string
	hk := s.HostKeys(id, nil, func(m string) { notes = append(notes, m) })
	k1 := newHostKey(t)
	k2 := newHostKey(t)
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2222}
	cb := hk.Callback(ctx)
	if err := cb("Example.org:2222", addr, k1); err != nil || len(notes) != 1 || !strings.Contains(notes[0], ssh.FingerprintSHA256(k1)) {
		t.Fatalf("first use: %v %v", err, notes)
	}
	if err := cb("example.org:2222", addr, k1); err != nil || len(notes) != 1 {
		t.Fatalf("same key: %v %v", err, notes)
	}
	err := cb("example.org:2222", addr, k2)
	if !errors.Is(err, ErrHostKeyChanged) || !strings.Contains(err.Error(), ssh.FingerprintSHA256(k2)) {
		t.Fatalf("changed key: %v", err)
	}
	if got := hk.Algorithms(ctx, "example.org:2222"); len(got) != 1 || got[0] != k1.Type() {
		t.Fatalf("algorithms %v", got)
	}
	other, _ := s.Create(ctx, alice("other"))
	if err := s.HostKeys(other, nil, nil).Callback(ctx)("example.org:2222", addr, k2); err != nil {
		t.Fatalf("other identity: %v", err)
	}
	if err := s.ForgetHost(ctx, "alice", "work", "example.org:2222"); err != nil {
		t.Fatal(err)
	}
	if err := cb("example.org:2222", addr, k2); err != nil {
		t.Fatalf("after forget: %v", err)
	}
}

func newHostKey(t *testing.T) ssh.PublicKey {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A key file others may read is refused; an environment key wins.
func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "k")
	os.WriteFile(p, make([]byte, 32), 0o644)
	if _, err := LoadKey(dir, p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("0644 key: %v", err)
	}
	t.Setenv(KeyEnv, strings.Repeat("ab", 32))
	if _, err := LoadKey(dir, p); err != nil {
		t.Fatal(err)
	}
	t.Setenv(KeyEnv, "short")
	if _, err := LoadKey(dir, p); err == nil {
		t.Fatal("short env key accepted")
	}
}

// The operator's known_hosts decides for the hosts it lists: their key
// passes without being recorded, another is refused; other hosts fall back
// to the identity's own pins.
func TestOperatorKnownHosts(t *testing.T) {
	s, _, dir := openTest(t)
	ctx := context.Background()
	id, _ := s.Create(ctx, alice("work"))
	good, bad, other := newHostKey(t), newHostKey(t), newHostKey(t)
	file := filepath.Join(dir, "known_hosts")
	os.WriteFile(file, []byte(knownhosts.Line([]string{"[git.example.org]:2222"}, good)+"\n"), 0o644)
	pinned, err := knownhosts.New(file)
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	cb := s.HostKeys(id, pinned, func(m string) { notes = append(notes, m) }).Callback(ctx)
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2222}
	if err := cb("git.example.org:2222", addr, good); err != nil || len(notes) != 0 {
		t.Fatalf("listed key: %v %v", err, notes)
	}
	if err := cb("git.example.org:2222", addr, bad); !errors.Is(err, ErrHostKeyChanged) || !strings.Contains(err.Error(), "known_hosts") {
		t.Fatalf("other key for a listed host: %v", err)
	}
	if err := cb("elsewhere.example.org:22", addr, other); err != nil || len(notes) != 1 {
		t.Fatalf("unlisted host: %v %v", err, notes)
	}
	if hosts, _ := s.KnownHosts(ctx, "alice", "work"); len(hosts) != 1 || hosts[0].Host != "elsewhere.example.org:22" {
		t.Fatalf("pinned %v", hosts)
	}
}

// Many first connections at once with different keys: one is pinned, the
// other refused; never an error about the table.
func TestHostKeyFirstUseRace(t *testing.T) {
	s, _, _ := openTest(t)
	ctx := context.Background()
	id, _ := s.Create(ctx, alice("work"))
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}
	var keys []ssh.PublicKey
	for range 16 {
		keys = append(keys, newHostKey(t))
	}
	errc := make(chan error, len(keys))
	start := make(chan struct{})
	for _, k := range keys {
		go func() {
			<-start
			errc <- s.HostKeys(id, nil, nil).Callback(ctx)("race.example.org:22", addr, k)
		}()
	}
	close(start)
	var ok, refused int
	for range keys {
		switch err := <-errc; {
		case err == nil:
			ok++
		case errors.Is(err, ErrHostKeyChanged):
			refused++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if ok != 1 || refused != len(keys)-1 {
		t.Fatalf("%d accepted, %d refused", ok, refused)
	}
}

// A sealed key copied onto another identity's row (someone with write
// access to the database but not the server key) does not open there.
func TestSealedKeyBoundToItsRow(t *testing.T) {
	s, db, _ := openTest(t)
	ctx := context.Background()
	a, _ := s.Create(ctx, alice("a"))
	mallory, _ := s.Create(ctx, Options{Owner: "mallory", Name: "m", AuthorName: "M", AuthorEmail: "m@example.org"})
	if _, err := db.Exec(`UPDATE git_identities SET sealed_key = (SELECT sealed_key FROM git_identities WHERE id = ?) WHERE id = ?`,
		a.ID, mallory.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(ctx, mallory); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("alice's sealed key opened on mallory's row: %v", err)
	}
	if _, err := s.Open(ctx, a); err != nil {
		t.Fatal(err)
	}
}
