// Package identity keeps the git identities of warren's users: who a
// session's commits are by (author name and email) and what a clone or a
// push logs in with (an SSH key, generated or imported, and optionally a
// forge token for HTTPS and pull requests). Private keys and tokens are
// sealed at rest with the server key (see Sealer) and opened only in the
// server's memory, for one clone or push; nothing here returns them to a
// caller, logs them or hands them to a jail. SSH host keys are pinned per
// identity on first use (hostkeys.go).
package identity

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"database/sql"
	"embed"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"strings"
	"time"
	"unicode"

	"golang.org/x/crypto/ssh"

	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/sessions/sqlschema"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Limits on what a caller names.
const (
	maxName  = 64
	maxField = 256
	maxToken = 4096
	maxKey   = 16 << 10 // an imported private key file
)

// Identity describes one stored identity. It never holds a secret.
type Identity struct {
	ID          string    `json:"id"`
	Owner       string    `json:"owner"`
	Name        string    `json:"name"`
	AuthorName  string    `json:"author_name"`
	AuthorEmail string    `json:"author_email"`
	PublicKey   string    `json:"public_key"` // authorized_keys line; "" when the identity has a token only
	Fingerprint string    `json:"fingerprint,omitempty"`
	HasToken    bool      `json:"has_token"`
	TokenUser   string    `json:"token_user,omitempty"`
	ForgeURL    string    `json:"forge_url,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

// Options describe a new identity.
type Options struct {
	Owner, Name             string
	AuthorName, AuthorEmail string
	// Token is a forge token (HTTPS clones and pushes, pull requests).
	Token string
	// TokenUser is the user name HTTPS sends with the token; default
	// "x-access-token" (GitHub; Gitea and GitLab accept any name).
	TokenUser string
	// ForgeURL is the forge's API base (https://api.github.com,
	// https://gitea.example/api/v1, https://gitlab.example/api/v4); empty:
	// guessed from the remote when a pull request is asked for.
	ForgeURL string
	// NoKey makes an identity with a token only.
	NoKey bool
}

// Store keeps identities in the database (component "identity").
type Store struct {
	db   *sql.DB
	seal *Sealer
	// Now is the clock; tests may replace it.
	Now func() time.Time
}

// ErrNotFound is an identity that does not exist or is another user's.
var ErrNotFound = errs.New(errs.NotFound, "no such identity")

// Open applies the identity tables' migrations and returns the store.
func Open(ctx context.Context, db *sql.DB, seal *Sealer) (*Store, error) {
	if err := sqlschema.Migrate(ctx, db, "identity", migrations, "migrations"); err != nil {
		return nil, err
	}
	return &Store{db: db, seal: seal, Now: time.Now}, nil
}

func invalidf(format string, a ...any) error {
	return errs.New(errs.Invalid, fmt.Sprintf(format, a...))
}

// checkName accepts names people type: letters, digits, . _ - .
func checkName(what, s string) error {
	if s == "" {
		return invalidf("%s is required", what)
	}
	if len(s) > maxName {
		return invalidf("%s is %d bytes; at most %d", what, len(s), maxName)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return invalidf("%s %q: use letters, digits, '.', '_' and '-'", what, s)
		}
	}
	return nil
}

func (o *Options) check() error {
	if o.Owner == "" || len(o.Owner) > maxField {
		return invalidf("an identity needs an owner of at most %d bytes", maxField)
	}
	if err := checkName("name", o.Name); err != nil {
		return err
	}
	o.AuthorName = strings.TrimSpace(o.AuthorName)
	if o.AuthorName == "" || len(o.AuthorName) > maxField || strings.ContainsAny(o.AuthorName, "<>\n") ||
		strings.IndexFunc(o.AuthorName, unicode.IsControl) >= 0 {
		return invalidf("author name is required: at most %d printable characters, no '<' or '>'", maxField)
	}
	a, err := mail.ParseAddress(o.AuthorEmail)
	if err != nil || a.Address != o.AuthorEmail || len(o.AuthorEmail) > maxField {
		return invalidf("author email %q is not an address like name@example.org", o.AuthorEmail)
	}
	if len(o.Token) > maxToken || strings.IndexFunc(o.Token, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return invalidf("the token must be at most %d bytes, without spaces or control characters", maxToken)
	}
	if o.TokenUser == "" {
		o.TokenUser = "x-access-token"
	}
	if err := checkName("token user", o.TokenUser); err != nil {
		return err
	}
	if o.ForgeURL != "" {
		u, err := url.Parse(o.ForgeURL)
		if err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" || u.User != nil || len(o.ForgeURL) > maxField {
			return invalidf("forge URL %q: give the API's base URL, like https://api.github.com", o.ForgeURL)
		}
	}
	if o.NoKey && o.Token == "" {
		return invalidf("an identity without a key needs a token")
	}
	return nil
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "id_" + hex.EncodeToString(b)
}

// Create generates an Ed25519 key (unless opts.NoKey) and stores a new
// identity.
func (s *Store) Create(ctx context.Context, opts Options) (Identity, error) {
	if err := opts.check(); err != nil {
		return Identity{}, err
	}
	var key any // a nil ed25519.PrivateKey in an interface is not nil
	if !opts.NoKey {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return Identity{}, err
		}
		key = k
	}
	return s.insert(ctx, opts, key)
}

// ErrPassphrase says an imported key is encrypted and needs its passphrase.
var ErrPassphrase = errs.New(errs.Invalid, "the private key is protected by a passphrase: give it")

// Import stores a new identity with an existing private key (OpenSSH or
// PEM; passphrase only if the key is encrypted). The key is kept sealed
// without its passphrase.
func (s *Store) Import(ctx context.Context, opts Options, keyPEM, passphrase []byte) (Identity, error) {
	if err := opts.check(); err != nil {
		return Identity{}, err
	}
	if len(keyPEM) > maxKey {
		return Identity{}, invalidf("the key file is %d bytes; a private key is at most %d", len(keyPEM), maxKey)
	}
	var key any
	var err error
	if len(passphrase) > 0 {
		key, err = ssh.ParseRawPrivateKeyWithPassphrase(keyPEM, passphrase)
	} else {
		key, err = ssh.ParseRawPrivateKey(keyPEM)
	}
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return Identity{}, ErrPassphrase
	}
	if errors.Is(err, x509.IncorrectPasswordError) {
		return Identity{}, invalidf("the passphrase does not open this private key")
	}
	if err != nil {
		// The parser's message never quotes the key.
		return Identity{}, invalidf("not a private key warren can use (OpenSSH or PEM: ed25519, ecdsa, rsa): %v", err)
	}
	if k, ok := key.(*ed25519.PrivateKey); ok {
		key = *k
	}
	return s.insert(ctx, opts, key)
}

func (s *Store) insert(ctx context.Context, opts Options, key any) (Identity, error) {
	id := Identity{ID: newID(), Owner: opts.Owner, Name: opts.Name, AuthorName: opts.AuthorName,
		AuthorEmail: opts.AuthorEmail, HasToken: opts.Token != "", TokenUser: opts.TokenUser, ForgeURL: opts.ForgeURL,
		CreatedAt: s.Now().UTC().Truncate(time.Millisecond)}
	sealedKey, sealedToken := "", ""
	if key != nil {
		signer, err := ssh.NewSignerFromKey(key)
		if err != nil {
			return Identity{}, invalidf("key type not supported: %v", err)
		}
		id.PublicKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " " + commentFor(id)
		block, err := ssh.MarshalPrivateKey(key, commentFor(id))
		if err != nil {
			return Identity{}, invalidf("key type not supported: %v", err)
		}
		plain := pem.EncodeToMemory(block)
		sealedKey, err = s.seal.Seal(plain, id.ID+"/key")
		clear(plain)
		if err != nil {
			return Identity{}, err
		}
	}
	if opts.Token != "" {
		var err error
		if sealedToken, err = s.seal.Seal([]byte(opts.Token), id.ID+"/token"); err != nil {
			return Identity{}, err
		}
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO git_identities (id, owner, name, author_name, author_email,
		public_key, sealed_key, sealed_token, token_user, forge_url, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id.ID, id.Owner, id.Name, id.AuthorName, id.AuthorEmail, id.PublicKey, sealedKey, sealedToken, id.TokenUser,
		id.ForgeURL, id.CreatedAt.UnixMilli())
	if err != nil {
		if strings.Contains(strings.ToLower(err.Error()), "unique") {
			return Identity{}, errs.New(errs.Conflict, fmt.Sprintf("%s already has an identity named %q: pick "+
				"another name, or remove that one first", id.Owner, id.Name))
		}
		return Identity{}, fmt.Errorf("store identity: %w", err)
	}
	id.Fingerprint = fingerprintOf(id.PublicKey)
	return id, nil
}

func commentFor(id Identity) string { return "warren:" + id.Owner + "/" + id.Name }

func fingerprintOf(authorized string) string {
	if authorized == "" {
		return ""
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(authorized))
	if err != nil {
		return ""
	}
	return ssh.FingerprintSHA256(k)
}

const columns = `id, owner, name, author_name, author_email, public_key, sealed_token, token_user, forge_url, created_at`

func scanIdentity(sc interface{ Scan(...any) error }) (Identity, error) {
	var id Identity
	var token string
	var created int64
	if err := sc.Scan(&id.ID, &id.Owner, &id.Name, &id.AuthorName, &id.AuthorEmail, &id.PublicKey, &token,
		&id.TokenUser, &id.ForgeURL, &created); err != nil {
		return Identity{}, err
	}
	id.HasToken = token != ""
	id.CreatedAt = time.UnixMilli(created).UTC()
	id.Fingerprint = fingerprintOf(id.PublicKey)
	return id, nil
}

// List returns owner's identities by name. Another user's are never seen.
func (s *Store) List(ctx context.Context, owner string) ([]Identity, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+columns+` FROM git_identities WHERE owner = ? ORDER BY name`, owner)
	if err != nil {
		return nil, fmt.Errorf("list identities: %w", err)
	}
	defer rows.Close()
	out := []Identity{}
	for rows.Next() {
		id, err := scanIdentity(rows)
		if err != nil {
			return nil, fmt.Errorf("list identities: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// Get returns owner's identity called name.
func (s *Store) Get(ctx context.Context, owner, name string) (Identity, error) {
	if len(name) > maxName {
		return Identity{}, invalidf("identity name is %d bytes; at most %d", len(name), maxName)
	}
	id, err := scanIdentity(s.db.QueryRowContext(ctx, `SELECT `+columns+` FROM git_identities WHERE owner = ? AND name = ?`,
		owner, name))
	if errors.Is(err, sql.ErrNoRows) {
		return Identity{}, errs.Wrap(errs.NotFound, ErrNotFound, fmt.Sprintf("%s has no identity named %q (list them "+
			"with identity_list or 'warren identity ls')", owner, name))
	}
	if err != nil {
		return Identity{}, fmt.Errorf("read identity: %w", err)
	}
	return id, nil
}

// ByID returns the identity id if owner owns it.
func (s *Store) ByID(ctx context.Context, owner, idv string) (Identity, error) {
	id, err := scanIdentity(s.db.QueryRowContext(ctx, `SELECT `+columns+` FROM git_identities WHERE owner = ? AND id = ?`,
		owner, idv))
	if errors.Is(err, sql.ErrNoRows) {
		return Identity{}, errs.Wrap(errs.NotFound, ErrNotFound, "the identity this session was made with has been removed")
	}
	if err != nil {
		return Identity{}, fmt.Errorf("read identity: %w", err)
	}
	return id, nil
}

// Remove deletes owner's identity called name and its pinned host keys.
func (s *Store) Remove(ctx context.Context, owner, name string) error {
	id, err := s.Get(ctx, owner, name)
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("remove identity: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM git_known_hosts WHERE identity_id = ?`, id.ID); err != nil {
		return fmt.Errorf("remove identity: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM git_identities WHERE id = ?`, id.ID); err != nil {
		return fmt.Errorf("remove identity: %w", err)
	}
	return tx.Commit()
}

// Secrets are an identity's opened secrets, in memory for one clone or
// push. They are never logged or returned by a tool.
type Secrets struct {
	Signer ssh.Signer // nil: no key
	Token  string     // "": no token
}

// Open opens the sealed secrets of id.
func (s *Store) Open(ctx context.Context, id Identity) (*Secrets, error) {
	var key, token string
	if err := s.db.QueryRowContext(ctx, `SELECT sealed_key, sealed_token FROM git_identities WHERE id = ? AND owner = ?`,
		id.ID, id.Owner).Scan(&key, &token); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("read identity: %w", err)
	}
	out := &Secrets{}
	if key != "" {
		plain, err := s.seal.Open(key, id.ID+"/key")
		if err != nil {
			return nil, err
		}
		out.Signer, err = ssh.ParsePrivateKey(plain)
		clear(plain)
		if err != nil {
			return nil, fmt.Errorf("open identity %s: %w", id.Name, ErrWrongKey)
		}
	}
	if token != "" {
		plain, err := s.seal.Open(token, id.ID+"/token")
		if err != nil {
			return nil, err
		}
		out.Token = string(plain)
	}
	return out, nil
}

// Migrate applies the identity tables' migrations to db without opening
// a store (warren migrate brings a target database to every store's
// schema; it needs no server key).
func Migrate(ctx context.Context, db *sql.DB) error {
	return sqlschema.Migrate(ctx, db, "identity", migrations, "migrations")
}
