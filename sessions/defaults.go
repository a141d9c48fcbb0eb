package sessions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
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
// binding. An archived or deleted default is replaced by a new one, which
// counts against Config.MaxSessionsPerUser like any other session.
//
// Creation is serialised per user and binding, never under m.mu: an insert
// may wait seconds for the database's write lock, and every other user's
// call takes m.mu.
func (m *Manager) defaultSession(ctx context.Context, user string) (*Session, error) {
	key, mode := "empty", ModeEmpty
	if m.cfg.BindDir != "" {
		key, mode = "bind:"+m.cfg.BindDir, ModeBind
	}
	dk := user + "\x00" + key
	if s, err := m.cachedDefault(ctx, dk); s != nil || err != nil {
		return s, err
	}
	v, _ := m.makingDefault.LoadOrStore(dk, &sync.Mutex{})
	mu := v.(*sync.Mutex)
	mu.Lock()
	defer mu.Unlock()
	if s, err := m.cachedDefault(ctx, dk); s != nil || err != nil {
		return s, err // made by a call that held the lock before us
	}
	s, err := m.store.GetDefault(ctx, user, key)
	if err == nil {
		return m.publishDefault(dk, s), nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	release, err := m.reserve(ctx, user)
	if err != nil {
		return nil, err
	}
	defer release()
	s = &Session{Meta: Meta{ID: NewID(), Owner: user, Name: "default", Mode: mode}, DefaultKey: key}
	if s.network, err = m.createNetwork(nil); err != nil {
		return nil, err
	}
	if mode == ModeBind {
		s.Source, s.Workspace = m.cfg.BindDir, m.cfg.BindDir
	} else {
		if m.cfg.DataDir == "" {
			return nil, fmt.Errorf("create session: no data directory configured")
		}
		s.Workspace = m.workspaceDir(s.ID)
		if err := os.MkdirAll(s.Workspace, 0o755); err != nil {
			return nil, fmt.Errorf("create workspace: %w", err)
		}
	}
	if err := m.store.Create(ctx, s); err != nil {
		if mode != ModeBind {
			forceRemove(s.Workspace)
		}
		return nil, err
	}
	s = m.publishDefault(dk, s)
	// The base for session_diff; a bound tree may be big.
	return s, m.setBase(ctx, s, string(mode))
}

// cachedDefault returns the cached default session dk when it is still
// active or paused; nil when there is none to use.
func (m *Manager) cachedDefault(ctx context.Context, dk string) (*Session, error) {
	m.mu.Lock()
	s := m.known[m.defaults[dk]]
	m.mu.Unlock()
	if s == nil {
		return nil, nil
	}
	if err := m.refresh(ctx, s); err != nil {
		return nil, err
	}
	if st := s.State(); st == StateActive || st == StatePaused {
		return s, nil
	}
	m.mu.Lock()
	if m.defaults[dk] == s.ID {
		delete(m.defaults, dk)
	}
	m.mu.Unlock()
	return nil, nil
}

// publishDefault caches s as the default session dk, or returns the copy
// already cached.
func (m *Manager) publishDefault(dk string, s *Session) *Session {
	s = m.remember(s)
	m.mu.Lock()
	m.defaults[dk] = s.ID
	m.mu.Unlock()
	return s
}
