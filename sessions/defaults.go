package sessions

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// Default sessions: the one a user works in when a call names none.

// Lookup is Get without side effects: an empty id finds the user's default
// session only if it exists already (ErrNotFound otherwise). Used to
// attribute usage, which must not create sessions.
func (m *Manager) Lookup(ctx context.Context, user, id string) (*Session, error) {
	if id != "" {
		return m.Get(ctx, user, id)
	}
	key := "empty"
	if m.cfg.BindDir != "" {
		key = "bind:" + m.cfg.BindDir
	}
	m.mu.Lock()
	sid, ok := m.defaults[user+"\x00"+key]
	m.mu.Unlock()
	if ok {
		return m.Get(ctx, user, sid)
	}
	return m.store.GetDefault(ctx, user, key)
}

// defaultSession finds or creates user's default session for the current
// binding. An archived or deleted default is replaced by a new one.
func (m *Manager) defaultSession(ctx context.Context, user string) (*Session, error) {
	key, mode := "empty", ModeEmpty
	if m.cfg.BindDir != "" {
		key, mode = "bind:"+m.cfg.BindDir, ModeBind
	}
	s, created, err := m.lockedDefault(ctx, user, key, mode)
	if created {
		// The base for session_diff, outside m.mu: a bound tree may be big.
		err = m.setBase(ctx, s, string(mode))
	}
	return s, err
}

// lockedDefault finds or creates the default session; created says that
// its base still has to be recorded.
func (m *Manager) lockedDefault(ctx context.Context, user, key string, mode Mode) (*Session, bool, error) {
	dk := user + "\x00" + key
	m.mu.Lock()
	if id, ok := m.defaults[dk]; ok {
		s := m.known[id]
		m.mu.Unlock()
		if err := m.refresh(ctx, s); err != nil {
			return nil, false, err
		}
		if st := s.State(); st == StateActive || st == StatePaused {
			return s, false, nil
		}
		m.mu.Lock()
		delete(m.defaults, dk)
	}
	defer m.mu.Unlock()
	s, err := m.store.GetDefault(ctx, user, key)
	if err == nil {
		s.checked = m.now()
		if old := m.known[s.ID]; old != nil {
			s = old
		}
		m.known[s.ID] = s
		m.defaults[dk] = s.ID
		return s, false, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, false, err
	}
	s = &Session{Meta: Meta{ID: NewID(), Owner: user, Name: "default", Mode: mode}, DefaultKey: key}
	if mode == ModeBind {
		s.Source, s.Workspace = m.cfg.BindDir, m.cfg.BindDir
	} else {
		if m.cfg.DataDir == "" {
			return nil, false, fmt.Errorf("create session: no data directory configured")
		}
		s.Workspace = m.workspaceDir(s.ID)
		if err := os.MkdirAll(s.Workspace, 0o755); err != nil {
			return nil, false, fmt.Errorf("create workspace: %w", err)
		}
	}
	if err := m.store.Create(ctx, s); err != nil {
		return nil, false, err
	}
	s.checked = m.now()
	m.known[s.ID] = s
	m.defaults[dk] = s.ID
	return s, true, nil
}
