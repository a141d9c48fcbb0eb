package identity

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/warrenhq/warren/sessions/errs"
)

// KeyEnv names the environment variable that may hold the server key:
// 32 bytes, base64 or hex.
const KeyEnv = "WARREN_SECRET_KEY"

// KeyFileName is the server key's file in the data directory when neither
// the environment nor the config names one.
const KeyFileName = "secret.key"

// Sealer seals and opens secrets with the server key (AES-256-GCM). A
// sealed value is bound to where it is kept (the identity and the column),
// so a sealed key copied onto another row does not open there.
type Sealer struct {
	aead cipher.AEAD
	// lazy, when set, finds the key on first use (see LazyKey).
	once sync.Once
	lazy func() (*Sealer, error)
	err  error
}

// LazyKey is LoadKey on first use: a server that never seals or opens a
// secret never reads, or makes, the key.
func LazyKey(dataDir, file string) *Sealer {
	return &Sealer{lazy: func() (*Sealer, error) { return LoadKey(dataDir, file) }}
}

func (s *Sealer) ready() error {
	if s.lazy == nil {
		return nil
	}
	s.once.Do(func() {
		k, err := s.lazy()
		if err != nil {
			s.err = err
			return
		}
		s.aead = k.aead
	})
	return s.err
}

// NewSealer makes a Sealer from a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != 32 {
		return nil, errs.New(errs.Invalid, fmt.Sprintf("the server key is %d bytes; it must be 32 (AES-256)", len(key)))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

const sealPrefix = "v1:"

// Seal encrypts plain for the place named by where.
func (s *Sealer) Seal(plain []byte, where string) (string, error) {
	if err := s.ready(); err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := s.aead.Seal(nonce, nonce, plain, []byte(where))
	return sealPrefix + base64.StdEncoding.EncodeToString(out), nil
}

// ErrWrongKey says a sealed secret does not open with this server key.
var ErrWrongKey = errs.New(errs.Internal, "the server key does not open this identity's secrets: the key "+
	"(file, "+KeyEnv+" or the config's secret_key_file) is not the one they were sealed with; restore that key, "+
	"or remove the identity and create it again")

// Open decrypts a value sealed for where.
func (s *Sealer) Open(sealed, where string) ([]byte, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	raw, ok := strings.CutPrefix(sealed, sealPrefix)
	if !ok {
		return nil, ErrWrongKey
	}
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(b) < s.aead.NonceSize() {
		return nil, ErrWrongKey
	}
	plain, err := s.aead.Open(nil, b[:s.aead.NonceSize()], b[s.aead.NonceSize():], []byte(where))
	if err != nil {
		return nil, ErrWrongKey
	}
	return plain, nil
}

// LoadKey finds the server key: the environment variable KeyEnv, else the
// file named (the config's secret_key_file), else KeyFileName in dataDir,
// made (32 random bytes, mode 0600) on first use. A key file anyone but
// its owner may read is refused.
func LoadKey(dataDir, file string) (*Sealer, error) {
	if v := strings.TrimSpace(os.Getenv(KeyEnv)); v != "" {
		key, err := decodeKey(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", KeyEnv, err)
		}
		return NewSealer(key)
	}
	if file != "" {
		key, err := readKeyFile(file)
		if err != nil {
			return nil, err
		}
		return NewSealer(key)
	}
	path := filepath.Join(dataDir, KeyFileName)
	key, err := readKeyFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key, err = makeKeyFile(path)
	}
	if err != nil {
		return nil, err
	}
	return NewSealer(key)
}

func decodeKey(v string) ([]byte, error) {
	if b, err := hex.DecodeString(v); err == nil && len(b) == 32 {
		return b, nil
	}
	if b, err := base64.StdEncoding.DecodeString(v); err == nil && len(b) == 32 {
		return b, nil
	}
	return nil, errs.New(errs.Invalid, "the server key must be 32 bytes written as 64 hex digits or base64 "+
		"(make one with: head -c32 /dev/urandom | base64)")
}

func readKeyFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("server key %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("server key %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, errs.New(errs.Invalid, fmt.Sprintf("server key %s is not a regular file", path))
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, errs.New(errs.Invalid, fmt.Sprintf("server key %s is readable by others (mode %04o): "+
			"chmod 600 it", path, st.Mode().Perm()))
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, fmt.Errorf("server key %s: %w", path, err)
	}
	if len(b) == 32 {
		return b, nil
	}
	key, err := decodeKey(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("server key %s: %w", path, err)
	}
	return key, nil
}

// makeKeyFile writes a new random key to a temporary file and links it
// into place, so that two processes starting at once end up with the same
// key and nobody ever reads a half-written one.
func makeKeyFile(path string) ([]byte, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secret-*")
	if err != nil {
		return nil, fmt.Errorf("create server key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err == nil {
		_, err = tmp.Write(key)
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("create server key: %w", err)
		}
	} else {
		tmp.Close()
		return nil, fmt.Errorf("create server key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, os.ErrExist) {
		return readKeyFile(path) // another process made it first
	} else if err != nil {
		return nil, fmt.Errorf("create server key: %w", err)
	}
	return key, nil
}
