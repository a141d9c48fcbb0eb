package identity

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/warrenhq/warren/sessions/errs"
)

// ErrHostKeyChanged refuses a host whose key is not the one pinned.
var ErrHostKeyChanged = errs.New(errs.Conflict, "host key changed")

// HostKeys decides which SSH host keys one identity accepts: the
// operator's known_hosts (Pinned, from the config) first; else the key
// recorded for this identity on its first connection to the host; else,
// on first use, it records the key offered and says so through Notice.
type HostKeys struct {
	store *Store
	id    Identity
	// Pinned is the operator's known_hosts callback; nil: none.
	Pinned ssh.HostKeyCallback
	// Notice is told of a key recorded on first use.
	Notice func(msg string)
}

// HostKeys returns the host-key policy of id.
func (s *Store) HostKeys(id Identity, pinned ssh.HostKeyCallback, notice func(string)) *HostKeys {
	return &HostKeys{store: s, id: id, Pinned: pinned, Notice: notice}
}

// Algorithms lists the host key algorithms to ask hostport for: those of
// the pinned key when there is one, so that a server offering several
// keys answers with the one that was recorded.
func (h *HostKeys) Algorithms(ctx context.Context, hostport string) []string {
	typ, _, err := h.lookup(ctx, hostport)
	if err != nil || typ == "" {
		return nil
	}
	if typ == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{typ}
}

func (h *HostKeys) lookup(ctx context.Context, hostport string) (typ string, key []byte, err error) {
	var b64 string
	err = h.store.db.QueryRowContext(ctx, `SELECT key_type, public_key FROM git_known_hosts WHERE identity_id = ? AND host = ?`,
		h.id.ID, hostport).Scan(&typ, &b64)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("read pinned host key: %w", err)
	}
	key, err = base64.StdEncoding.DecodeString(b64)
	return typ, key, err
}

// Callback returns the ssh.HostKeyCallback for one connection.
func (h *HostKeys) Callback(ctx context.Context) ssh.HostKeyCallback {
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		hostport := normalHost(hostname)
		if h.Pinned != nil {
			err := h.Pinned(hostname, remote, key)
			var ke *knownhosts.KeyError
			switch {
			case err == nil:
				return nil
			case errors.As(err, &ke) && len(ke.Want) == 0:
				// Not in the operator's list: this identity's own pins decide.
			case errors.As(err, &ke):
				for _, w := range ke.Want {
					if w.Key.Type() == key.Type() {
						return changed(hostport, w.Key, key, "the server's known_hosts")
					}
				}
				return errs.Wrap(errs.Conflict, ErrHostKeyChanged, fmt.Sprintf("%s offered a %s host key, and the "+
					"server's known_hosts lists only %s keys for it: add its %s key there (checked with the server's "+
					"administrator)", hostport, key.Type(), ke.Want[0].Key.Type(), key.Type()))
			default:
				return fmt.Errorf("check host key of %s: %w", hostport, err)
			}
		}
		_, want, err := h.lookup(ctx, hostport)
		if err != nil {
			return err
		}
		if want != nil {
			if bytes.Equal(want, key.Marshal()) {
				return nil
			}
			old, err := ssh.ParsePublicKey(want)
			if err != nil {
				return fmt.Errorf("read pinned host key of %s: %w", hostport, err)
			}
			return changed(hostport, old, key, "identity "+h.id.Name)
		}
		// Two first connections at once: one key is recorded, and the
		// other connection is judged against it.
		res, err := h.store.db.ExecContext(ctx, `INSERT INTO git_known_hosts (identity_id, host, key_type, public_key, created_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (identity_id, host) DO NOTHING`, h.id.ID, hostport, key.Type(),
			base64.StdEncoding.EncodeToString(key.Marshal()), h.store.Now().UnixMilli())
		if err != nil {
			return fmt.Errorf("record host key of %s: %w", hostport, err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			_, want, err := h.lookup(ctx, hostport)
			if err != nil {
				return err
			}
			if !bytes.Equal(want, key.Marshal()) {
				old, err := ssh.ParsePublicKey(want)
				if err != nil {
					return fmt.Errorf("read pinned host key of %s: %w", hostport, err)
				}
				return changed(hostport, old, key, "identity "+h.id.Name)
			}
			return nil
		}
		if h.Notice != nil {
			h.Notice(fmt.Sprintf("first connection to %s with identity %s: its host key %s %s is now pinned",
				hostport, h.id.Name, key.Type(), ssh.FingerprintSHA256(key)))
		}
		return nil
	}
}

func changed(hostport string, want, got ssh.PublicKey, where string) error {
	return errs.Wrap(errs.Conflict, ErrHostKeyChanged, fmt.Sprintf("the SSH host key of %s has changed: %s pins "+
		"%s %s, the server offered %s %s. Someone may be intercepting the connection; if the server's key really "+
		"changed, check the new fingerprint with its administrator, then forget the old one "+
		"('warren identity forget-host')", hostport, where, want.Type(), ssh.FingerprintSHA256(want), got.Type(),
		ssh.FingerprintSHA256(got)))
}

// normalHost writes host:port as known_hosts does for a lookup key:
// lower-case host, port always present.
func normalHost(hostport string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return strings.ToLower(hostport)
	}
	return net.JoinHostPort(strings.ToLower(host), port)
}

// KnownHost is one pinned host key.
type KnownHost struct {
	Host        string    `json:"host"`
	KeyType     string    `json:"key_type"`
	Fingerprint string    `json:"fingerprint"`
	PinnedAt    time.Time `json:"pinned_at"`
}

// KnownHosts lists the host keys pinned for owner's identity name.
func (s *Store) KnownHosts(ctx context.Context, owner, name string) ([]KnownHost, error) {
	id, err := s.Get(ctx, owner, name)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT host, key_type, public_key, created_at FROM git_known_hosts
		WHERE identity_id = ? ORDER BY host`, id.ID)
	if err != nil {
		return nil, fmt.Errorf("list host keys: %w", err)
	}
	defer rows.Close()
	out := []KnownHost{}
	for rows.Next() {
		var k KnownHost
		var b64 string
		var at int64
		if err := rows.Scan(&k.Host, &k.KeyType, &b64, &at); err != nil {
			return nil, err
		}
		if raw, err := base64.StdEncoding.DecodeString(b64); err == nil {
			if pk, err := ssh.ParsePublicKey(raw); err == nil {
				k.Fingerprint = ssh.FingerprintSHA256(pk)
			}
		}
		k.PinnedAt = time.UnixMilli(at).UTC()
		out = append(out, k)
	}
	return out, rows.Err()
}

// ForgetHost removes the key pinned for host (host:port, or host for
// port 22) from owner's identity name, so that the next connection pins
// the key it is offered.
func (s *Store) ForgetHost(ctx context.Context, owner, name, host string) error {
	id, err := s.Get(ctx, owner, name)
	if err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(host, "22")
	}
	res, err := s.db.ExecContext(ctx, `DELETE FROM git_known_hosts WHERE identity_id = ? AND host = ?`, id.ID, normalHost(host))
	if err != nil {
		return fmt.Errorf("forget host key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errs.New(errs.NotFound, fmt.Sprintf("identity %s has no key pinned for %s", name, host))
	}
	return nil
}
