package sessions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/warrenhq/warren/sandbox"
)

// Config tunes a Manager.
type Config struct {
	// DataDir holds the workspaces of empty sessions, under workspaces/<id>.
	DataDir string
	// BindDir, when set, is the directory every user's default session is
	// bound to (serve stdio --workspace DIR). Empty: default sessions get
	// an empty workspace of their own.
	BindDir string
	// Profile builds the jail profile of a workspace; nil means
	// sandbox.DefaultProfile.
	Profile func(workspace string) sandbox.Profile
}

// Manager maps (user, session id) to sessions and their live shells. Shells
// are created lazily on first use and start no process until their first
// command.
type Manager struct {
	store *Store
	cfg   Config

	// mu protects the maps below and serialises default-session creation.
	mu   sync.Mutex
	live map[string]*sandbox.Shell
	// known caches sessions already read, so that a tool call does not pay
	// a database round trip; defaults maps owner and binding to an id.
	known    map[string]*Session
	defaults map[string]string
}

// NewManager returns a Manager over store.
func NewManager(store *Store, cfg Config) (*Manager, error) {
	if cfg.BindDir != "" {
		abs, err := filepath.Abs(cfg.BindDir)
		if err != nil {
			return nil, fmt.Errorf("workspace %s: %w", cfg.BindDir, err)
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return nil, fmt.Errorf("workspace %s: %w", cfg.BindDir, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("workspace %s is not a directory", cfg.BindDir)
		}
		cfg.BindDir = abs
	}
	if cfg.Profile == nil {
		cfg.Profile = sandbox.DefaultProfile
	}
	return &Manager{store: store, cfg: cfg, live: map[string]*sandbox.Shell{},
		known: map[string]*Session{}, defaults: map[string]string{}}, nil
}

// Store returns the manager's store.
func (m *Manager) Store() *Store { return m.store }

// Get returns user's session id; an empty id means the user's default
// session, created on first use. Another user's session is ErrNotFound.
func (m *Manager) Get(ctx context.Context, user, id string) (*Session, error) {
	if id == "" {
		return m.defaultSession(ctx, user)
	}
	m.mu.Lock()
	s := m.known[id]
	m.mu.Unlock()
	if s != nil {
		if s.Owner != user {
			return nil, ErrNotFound
		}
		return s, nil
	}
	s, err := m.store.Get(ctx, user, id)
	if err != nil {
		return nil, err
	}
	return m.remember(s), nil
}

// remember caches s, or returns the copy already cached.
func (m *Manager) remember(s *Session) *Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.known[s.ID]; old != nil {
		return old
	}
	m.known[s.ID] = s
	return s
}

// Shell returns the live shell of session s, creating it (without starting
// a process) with the session's saved state.
func (m *Manager) Shell(s *Session) (*sandbox.Shell, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sh, ok := m.live[s.ID]; ok {
		return sh, nil
	}
	state := s.shellState()
	sh, err := sandbox.NewShell(m.cfg.Profile(s.Workspace), sandbox.Options{State: &state})
	if err != nil {
		return nil, fmt.Errorf("start shell of session %s: %w", s.ID, err)
	}
	m.live[s.ID] = sh
	return sh, nil
}

// Open is Get followed by Shell.
func (m *Manager) Open(ctx context.Context, user, id string) (*Session, *sandbox.Shell, error) {
	s, err := m.Get(ctx, user, id)
	if err != nil {
		return nil, nil, err
	}
	sh, err := m.Shell(s)
	if err != nil {
		return nil, nil, err
	}
	return s, sh, nil
}

// SaveState records the shell's cwd and exports so that they survive a
// restart of the server. Unchanged state is not written again: most
// commands change neither, and a write per command would cost more than
// the command.
func (m *Manager) SaveState(ctx context.Context, s *Session, sh *sandbox.Shell) error {
	st := sh.State()
	s.mu.Lock()
	same := sameState(s.Shell, st)
	s.Shell = st
	s.mu.Unlock()
	if same {
		return nil
	}
	return m.store.SaveShell(ctx, s.ID, st)
}

func sameState(a, b sandbox.State) bool {
	if a.Cwd != b.Cwd || len(a.Env) != len(b.Env) {
		return false
	}
	for k, v := range a.Env {
		if w, ok := b.Env[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// List returns user's sessions without starting anything.
func (m *Manager) List(ctx context.Context, user string) ([]*Session, error) {
	return m.store.List(ctx, user)
}

// Close saves every live shell's state and kills its jail.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	live := m.live
	m.live = map[string]*sandbox.Shell{}
	m.mu.Unlock()
	var errs []error
	for id, sh := range live {
		if err := m.store.SaveShell(ctx, id, sh.State()); err != nil {
			errs = append(errs, err)
		}
		sh.Close()
	}
	return errors.Join(errs...)
}

// defaultSession finds or creates user's default session for the current
// binding.
func (m *Manager) defaultSession(ctx context.Context, user string) (*Session, error) {
	key, mode := "empty", ModeEmpty
	if m.cfg.BindDir != "" {
		key, mode = "bind:"+m.cfg.BindDir, ModeBind
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.defaults[user+"\x00"+key]; ok {
		return m.known[id], nil
	}
	s, err := m.store.GetDefault(ctx, user, key)
	if err == nil {
		m.known[s.ID] = s
		m.defaults[user+"\x00"+key] = s.ID
	}
	if !errors.Is(err, ErrNotFound) {
		return s, err
	}
	s = &Session{ID: NewID(), Owner: user, Name: "default", Mode: mode, DefaultKey: key}
	if mode == ModeBind {
		s.Source, s.Workspace = m.cfg.BindDir, m.cfg.BindDir
	} else {
		if m.cfg.DataDir == "" {
			return nil, fmt.Errorf("create session: no data directory configured")
		}
		s.Workspace = filepath.Join(m.cfg.DataDir, "workspaces", s.ID)
		if err := os.MkdirAll(s.Workspace, 0o755); err != nil {
			return nil, fmt.Errorf("create workspace: %w", err)
		}
	}
	if err := m.store.Create(ctx, s); err != nil {
		return nil, err
	}
	m.known[s.ID] = s
	m.defaults[user+"\x00"+key] = s.ID
	return s, nil
}
