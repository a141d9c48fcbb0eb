package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/warrenhq/warren/sessions/bound"
	"github.com/warrenhq/warren/sessions/workspace"
)

// CreateOptions describe a new session.
type CreateOptions struct {
	// Source is a git URL, a local repository or directory, or "" (empty).
	Source string
	// Mode is clone, bind or empty; "" infers it from Source.
	Mode Mode
	// Ref is a branch, tag or commit to check out (clone only).
	Ref string
	// Name is a label for people; optional.
	Name string
	// Progress receives clone progress; may be nil.
	Progress io.Writer
	// Network is the session's network policy; nil means the server's
	// default (see network.go).
	Network *Network
	// CopyOf, when set, makes the workspace a copy of the current state of
	// this session of the same user (see createCopy); Source, Mode and Ref
	// must then be empty.
	CopyOf string
	// Auth logs the clone in with a git identity's key or token (see
	// sessions/identity); the cloned commit is then kept in the audit
	// repository for a later push (push.go). Nil: anonymous.
	Auth transport.AuthMethod
}

func (m *Manager) workspaceDir(id string) string {
	return filepath.Join(m.cfg.DataDir, "workspaces", id)
}
func (m *Manager) auditDir(id string) string { return filepath.Join(m.cfg.DataDir, "audit", id+".git") }

// openAudit opens a session's audit repository with the operator's
// exclusions.
func (m *Manager) openAudit(id string) (*workspace.Audit, error) {
	a, err := workspace.OpenAudit(m.auditDir(id))
	if err != nil {
		return nil, err
	}
	a.Exclude(m.cfg.AuditExclude)
	return a, nil
}

// homeDir is the session's $HOME, outside its workspace.
func (m *Manager) homeDir(id string) string { return filepath.Join(m.cfg.DataDir, "homes", id) }

// opLock serialises lifecycle changes and audit access of one session.
func (m *Manager) opLock(id string) func() {
	v, _ := m.ops.LoadOrStore(id, &sync.Mutex{})
	mu := v.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Limits on what a client names as a session's source and git ref.
const (
	maxSource = 4 << 10 // PATH_MAX
	maxRef    = 256
)

// Create makes a session for user: prepares its workspace (clone, bind or
// empty), records the audit base that session_diff compares against, and
// stores it. The session is active; its shell starts on the first command.
// On a full disk the error says so, without the server's paths.
func (m *Manager) Create(ctx context.Context, user string, opts CreateOptions) (*Session, error) {
	s, err := m.create(ctx, user, opts)
	return s, workspace.FullDisk(err, "could not create the session")
}

func (m *Manager) create(ctx context.Context, user string, opts CreateOptions) (*Session, error) {
	if m.cfg.DataDir == "" {
		return nil, fmt.Errorf("create session: no data directory configured")
	}
	if opts.CopyOf != "" {
		return m.createCopy(ctx, user, opts)
	}
	if len(opts.Name) > 100 || strings.IndexFunc(opts.Name, unicode.IsControl) >= 0 {
		return nil, invalidf("name must be at most 100 printable characters")
	}
	// The session keeps its source and ref for good, and errors quote them.
	if len(opts.Source) > maxSource {
		return nil, invalidf("source is %d bytes: a path or git URL is at most %d", len(opts.Source), maxSource)
	}
	if len(opts.Ref) > maxRef {
		return nil, invalidf("ref is %d bytes: a git ref is at most %d", len(opts.Ref), maxRef)
	}
	network, err := m.createNetwork(opts.Network)
	if err != nil {
		return nil, err
	}
	release, err := m.reserve(ctx, user)
	if err != nil {
		return nil, err
	}
	defer release()

	id := NewID()
	p, err := workspace.Prepare(ctx, workspace.Spec{Source: opts.Source, Mode: workspace.Mode(opts.Mode), Ref: opts.Ref,
		Dir: m.workspaceDir(id), Policy: m.policy(), Progress: opts.Progress, Auth: opts.Auth, KeepBaseIn: m.keepBaseIn(id, opts)})
	if err != nil {
		forceRemove(m.auditDir(id))
		return nil, err
	}
	s := &Session{Meta: Meta{ID: id, Owner: user, Name: opts.Name, Mode: Mode(p.Mode), Source: p.Source,
		Ref: opts.Ref, BaseCommit: p.Commit}, Workspace: p.Dir, network: network}
	cleanup := func() {
		m.dropShell(id, true) // a bound session's base started its jail
		if s.Mode != ModeBind {
			forceRemove(m.workspaceDir(id))
		}
		forceRemove(m.auditDir(id))
		if rm := m.cfg.RemoveRunner; rm != nil {
			_ = rm(context.WithoutCancel(ctx), id)
		}
	}
	origin := string(p.Mode)
	if p.Commit != "" {
		origin = "clone of " + p.Source + " at " + p.Commit
	} else if p.Mode == workspace.Bind {
		origin = "bind " + p.Dir
	}
	if err := m.setBase(ctx, s, origin); err != nil {
		cleanup()
		return nil, err
	}
	if prep := m.cfg.PrepareRunner; prep != nil {
		if err := prep(ctx, id); err != nil {
			cleanup()
			return nil, err
		}
	}
	if err := m.store.Create(ctx, s); err != nil {
		cleanup()
		return nil, err
	}
	return m.remember(s), nil
}

// reserve counts a session being created against user's cap until release.
func (m *Manager) reserve(ctx context.Context, user string) (func(), error) {
	if m.cfg.MaxSessionsPerUser <= 0 {
		return func() {}, nil
	}
	n, err := m.store.Count(ctx, user)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n+m.creating[user] >= m.cfg.MaxSessionsPerUser {
		return nil, limitf("you have %d sessions, the limit per user is %d: delete one you no longer need "+
			"(session_control action delete; archived sessions count until deleted)", n+m.creating[user], m.cfg.MaxSessionsPerUser)
	}
	m.creating[user]++
	return func() { m.mu.Lock(); m.creating[user]--; m.mu.Unlock() }, nil
}

// setBase records the session's workspace as the base of its diffs.
func (m *Manager) setBase(ctx context.Context, s *Session, origin string) error {
	defer m.opLock(s.ID)()
	ws, err := m.openWorkspace(s)
	if err != nil {
		return err
	}
	defer ws.Close()
	if err := os.MkdirAll(filepath.Dir(m.auditDir(s.ID)), 0o700); err != nil {
		return fmt.Errorf("create audit directory: %w", err)
	}
	a, err := m.openAudit(s.ID)
	if err != nil {
		return err
	}
	if s.Mode == ModeBind {
		// A bound directory is the user's, and other sessions' jails may
		// bind it too: its base is walked by this session's runner, in its
		// jail (started for it; the reaper stops it when idle).
		err := m.withTree(ctx, s, func(src workspace.TreeSource) error {
			_, err := a.SetBase(ctx, src, origin)
			return err
		})
		if err != nil {
			return fmt.Errorf("record base of session %s: %w", s.ID, err)
		}
		return nil
	}
	// A fresh clone, an empty directory or a copy, before any jail of the
	// session exists, in a directory no other jail binds: the server's own
	// walk races nothing (see workspace.HostTree).
	if _, err := a.SetBase(ctx, workspace.HostTree(ws.ProcPath()), origin); err != nil {
		return fmt.Errorf("record base of session %s: %w", s.ID, err)
	}
	return nil
}

// snapshot commits the workspace, as the session's runner streams it from
// inside the jail, on the session's snapshots ref. Called with the
// session's op lock held.
func (m *Manager) snapshot(ctx context.Context, s *Session, reason string) error {
	a, err := m.openAudit(s.ID)
	if err != nil {
		return err
	}
	err = m.withTree(ctx, s, func(src workspace.TreeSource) error {
		_, err := a.Snapshot(ctx, src, reason)
		return err
	})
	if err != nil {
		return fmt.Errorf("snapshot session %s: %w", s.ID, err)
	}
	return nil
}

// Control applies a lifecycle action by name: pause, resume, archive or
// delete.
func (m *Manager) Control(ctx context.Context, user, id, action string) (*Session, error) {
	switch action {
	case "pause":
		return m.Pause(ctx, user, id)
	case "resume":
		return m.Resume(ctx, user, id)
	case "archive":
		return m.Archive(ctx, user, id)
	case "delete":
		return m.Delete(ctx, user, id)
	}
	return nil, invalidf("action %q: use pause, resume, archive or delete", bound.String(action, 32))
}

// transition moves s to `to` if it is in one of from, in the database and
// in the cache; otherwise it returns a StateError with the actual state.
func (m *Manager) transition(ctx context.Context, s *Session, action string, to State, from ...State) error {
	ok, at, err := m.store.Transition(ctx, s.ID, from, to)
	if err != nil {
		return err
	}
	if !ok {
		st, err := m.store.state(ctx, s.ID)
		if errors.Is(err, ErrNotFound) && s.State() == StateDeleted {
			st, err = StateDeleted, nil // its row went with it
		}
		if err != nil {
			return err
		}
		s.setState(st, at)
		return &StateError{ID: s.ID, State: st, Action: action}
	}
	s.setState(to, at)
	if to == StateArchived || to == StateDeleted {
		m.mu.Lock()
		for k, v := range m.defaults {
			if v == s.ID {
				delete(m.defaults, k)
			}
		}
		m.mu.Unlock()
	}
	return nil
}

// idleShell saves the state of s's shell when it exists, or returns an
// ErrBusy error when a command runs in it.
func (m *Manager) idleShell(ctx context.Context, s *Session, action string) error {
	m.mu.Lock()
	l := m.live[s.ID]
	m.mu.Unlock()
	if l != nil && l.sh.Busy() {
		return busy(s.ID, action)
	}
	if l != nil {
		// Save before stopping: the row must hold the final cwd and exports.
		ctx, cancel := context.WithTimeout(ctx, stateWait)
		defer cancel()
		if err := m.saveState(ctx, s, l.sh); err != nil {
			return fmt.Errorf("cannot %s session %s now: %w; retry in a moment", action, s.ID, err)
		}
	}
	return nil
}

// stateWait bounds how long a lifecycle action waits for the shell's state
// to reach the database before it gives up.
const stateWait = 10 * time.Second

// Pause saves the shell's state, snapshots the workspace and stops the
// shell. A paused session refuses commands and writes until resumed.
func (m *Manager) Pause(ctx context.Context, user, id string) (*Session, error) {
	s, err := m.Get(ctx, user, id)
	if err != nil {
		return nil, err
	}
	defer m.opLock(s.ID)()
	if st := s.State(); st != StateActive {
		return nil, &StateError{ID: s.ID, State: st, Action: "pause"}
	}
	if err := m.guard(s); err != nil {
		return nil, err
	}
	// Among replicas, the one driving the jail lets it go first, its
	// command ended: the session is paused where nothing runs.
	if err := m.leases.hold(ctx, s); err != nil {
		return nil, err
	}
	if err := m.idleShell(ctx, s, "pause"); err != nil {
		return nil, err
	}
	if err := m.transition(ctx, s, "pause", StatePaused, StateActive); err != nil {
		return nil, err
	}
	// The runner of the jail still up walks the workspace; then it stops.
	err = m.snapshot(ctx, s, "pause")
	m.dropShell(s.ID, false)
	return s, err
}

// Resume makes a paused session active again; its shell restarts lazily
// with the saved cwd and exports.
func (m *Manager) Resume(ctx context.Context, user, id string) (*Session, error) {
	s, err := m.Get(ctx, user, id)
	if err != nil {
		return nil, err
	}
	defer m.opLock(s.ID)()
	return s, m.transition(ctx, s, "resume", StateActive, StatePaused)
}

// Archive snapshots the workspace and makes the session read-only for
// good: its shell never starts again and file writes are refused.
func (m *Manager) Archive(ctx context.Context, user, id string) (*Session, error) {
	s, err := m.Get(ctx, user, id)
	if err != nil {
		return nil, err
	}
	unlock := m.opLock(s.ID)
	if st := s.State(); st != StateActive && st != StatePaused {
		unlock()
		return nil, &StateError{ID: s.ID, State: st, Action: "archive"}
	}
	if err := m.guard(s); err != nil {
		unlock()
		return nil, err
	}
	if err := m.leases.hold(ctx, s); err != nil { // as for Pause
		unlock()
		return nil, err
	}
	if err := m.idleShell(ctx, s, "archive"); err != nil {
		unlock()
		return nil, err
	}
	err = m.transition(ctx, s, "archive", StateArchived, StateActive, StatePaused)
	if err == nil {
		err = m.snapshot(ctx, s, "archive")
		m.dropShell(s.ID, true)
	}
	unlock()
	if err != nil {
		return s, err
	}
	m.ended(ctx, s.ID)
	return s, nil
}

// Delete removes the session's workspace (never a bound directory: that is
// the user's own), its audit repository and home, then its rows (purge.go):
// only its usage records stay. A running command is killed.
func (m *Manager) Delete(ctx context.Context, user, id string) (*Session, error) {
	s, err := m.Get(ctx, user, id)
	if err != nil {
		return nil, err
	}
	unlock := m.opLock(s.ID)
	prev := s.State()
	err = m.transition(ctx, s, "delete", StateDeleted, StateActive, StatePaused, StateArchived)
	deleted := err == nil
	if err == nil {
		m.dropShell(s.ID, true)
		m.quota.forget(s.ID)
		var errs []error
		if s.Mode != ModeBind {
			// What warren made, never the stored path: a row naming
			// another directory must not have it removed.
			errs = append(errs, forceRemove(m.workspaceDir(s.ID)))
		}
		errs = append(errs, forceRemove(m.auditDir(s.ID)), forceRemove(m.homeDir(s.ID)))
		if rm := m.cfg.RemoveRunner; rm != nil {
			errs = append(errs, rm(ctx, s.ID))
		}
		if err = errors.Join(errs...); err != nil {
			// The row stays, in state deleted: the next server start
			// tries again (PurgeDeleted).
			err = fmt.Errorf("session %s is deleted, but removing its files failed (the next server start retries): %w", s.ID, err)
		} else if perr := m.purge(ctx, s.ID); perr != nil {
			err = fmt.Errorf("session %s is deleted and its files are gone, but removing its records failed "+
				"(the next server start retries): %w", s.ID, perr)
		}
	}
	unlock()
	if deleted && prev != StateArchived { // an archived session's end was reported already
		m.ended(ctx, s.ID)
	}
	return s, err
}

func (m *Manager) ended(ctx context.Context, id string) {
	m.mu.Lock()
	fn := m.cfg.OnEnd
	m.mu.Unlock()
	if fn != nil {
		fn(context.WithoutCancel(ctx), id)
	}
}

// Diff compares user's session's workspace with its base, untracked files
// included. maxPatch caps the patch text (0: no cap).
func (m *Manager) Diff(ctx context.Context, user, id string, maxPatch int) (*Session, workspace.Diff, error) {
	s, err := m.Get(ctx, user, id)
	if err != nil {
		return nil, workspace.Diff{}, err
	}
	if st := s.State(); st == StateDeleted {
		return nil, workspace.Diff{}, &StateError{ID: s.ID, State: st, Action: "diff"}
	}
	defer m.opLock(s.ID)()
	if err := m.guard(s); err != nil {
		return nil, workspace.Diff{}, err
	}
	if _, err := os.Stat(filepath.Join(m.auditDir(s.ID), "HEAD")); err != nil {
		return nil, workspace.Diff{}, fmt.Errorf("session %s has no base snapshot to compare with (it predates diffs, "+
			"or it was just created and its base is still being recorded): %w", s.ID, workspace.ErrNoBase)
	}
	a, err := m.openAudit(s.ID)
	if err != nil {
		return nil, workspace.Diff{}, err
	}
	var d workspace.Diff
	err = m.withTree(ctx, s, func(src workspace.TreeSource) error {
		d, err = a.Diff(ctx, src, maxPatch)
		return err
	})
	if errors.Is(err, workspace.ErrNoBase) {
		err = fmt.Errorf("session %s has no base snapshot to compare with yet: %w", s.ID, err)
	}
	return s, d, err
}

// Snapshots lists the audit snapshots of user's session, newest first.
func (m *Manager) Snapshots(ctx context.Context, user, id string) ([]workspace.SnapshotInfo, error) {
	s, err := m.Get(ctx, user, id)
	if err != nil {
		return nil, err
	}
	if st := s.State(); st == StateDeleted {
		return nil, &StateError{ID: s.ID, State: st, Action: "list snapshots of"}
	}
	defer m.opLock(s.ID)()
	a, err := m.openAudit(s.ID)
	if err != nil {
		return nil, err
	}
	return a.Snapshots()
}

// forceRemove deletes path even when the jail left directories without
// write permission in it (a non-root server cannot otherwise remove their
// entries).
func forceRemove(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(path)
}
