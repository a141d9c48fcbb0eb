package sessions

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/warrenhq/warren/sessions/workspace"
)

// Where a session may work. Sources are decided once, when a session is
// created (workspace.Prepare, under the policy below), and a session's
// stored workspace is checked again on every use: a row written by an
// older version, or a bound path whose links changed since, must not hand
// a system directory to the file tools, a shell or the audit.

// policy is what the callers of this manager may use as sources.
func (m *Manager) policy() workspace.Policy {
	return workspace.Policy{
		Local:       m.cfg.AllowLocalSources,
		Trusted:     m.cfg.AllowLocalSources && !m.cfg.RemoteCallers,
		DataDir:     m.dataReal,
		NoRootOwned: m.cfg.RemoteCallers && os.Geteuid() == 0,
		NoBind:      m.cfg.NoBind,
	}
}

// guard refuses a session whose workspace does not resolve to a place it
// may be: see openWorkspace. Three system calls when nothing changed since
// the last check (workspace.Stamp.Reopen, then close).
func (m *Manager) guard(s *Session) error {
	d, err := m.openWorkspace(s)
	if err != nil {
		return err
	}
	d.Close()
	return nil
}

// openWorkspace opens s's workspace and checks the opened directory: a
// bound directory passes the rules for local sources (the operator's
// --workspace is not held to the root-owner rule, which is for what token
// holders ask for); any other workspace must be the one warren made for it
// under the data directory. The caller acts beneath the descriptor
// (LocalDir.ProcPath), never by the path again, and closes it.
//
// Judging costs a stat and the policy on top of the open; a directory
// whose stamp is the one that last passed is the same directory at the
// same place with the same owner (workspace.Stamp), and is not judged
// again. The stamp is of the host's directory: nothing inside the jail can
// set it to a value that passed, only make it change (and cost a check).
func (m *Manager) openWorkspace(s *Session) (*workspace.LocalDir, error) {
	if s.Workspace == "" {
		return nil, fmt.Errorf("session %s has no workspace", s.ID)
	}
	s.mu.Lock()
	passed := s.guarded
	s.mu.Unlock()
	if d := passed.Reopen(s.Workspace); d != nil {
		return d, nil // the directory that passed, at the same place
	}
	if s.Mode == ModeBind {
		d, err := workspace.OpenSource(s.Workspace)
		if err == nil && !s.passed(d.Stamp) {
			p := m.policy()
			p.Local = true
			if s.DefaultKey != "" {
				p.NoRootOwned = false
			}
			if err = d.Check(s.Workspace, p); err != nil {
				d.Close()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("session %s cannot be used: %w", s.ID, err)
		}
		s.pass(d.Stamp)
		return d, nil
	}
	d, err := workspace.OpenDir(s.Workspace)
	if err != nil {
		return nil, fmt.Errorf("session %s: workspace %s: %w", s.ID, s.Workspace, err)
	}
	if s.passed(d.Stamp) {
		return d, nil
	}
	want := filepath.Join(m.dataReal, "workspaces", s.ID)
	real, err := d.Resolve()
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("session %s: workspace %s: %w", s.ID, s.Workspace, err)
	}
	if real != want {
		d.Close()
		return nil, fmt.Errorf("%w: session %s cannot be used: its workspace %s is not the one warren made for it "+
			"(%s); delete the session", workspace.ErrInvalid, s.ID, real, want)
	}
	s.pass(d.Stamp)
	return d, nil
}

// passed reports whether st is the stamp of the workspace directory that
// last passed the checks.
func (s *Session) passed(st workspace.Stamp) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return st != (workspace.Stamp{}) && st == s.guarded
}

// pass records the stamp of a workspace directory that passed the checks.
func (s *Session) pass(st workspace.Stamp) {
	s.mu.Lock()
	s.guarded = st
	s.mu.Unlock()
}

// resolveDataDir returns the data directory with its links resolved, the
// form sources are compared with.
func resolveDataDir(dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real, nil
	}
	return abs, nil // not made yet: nothing can be inside it
}
