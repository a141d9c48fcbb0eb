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
	}
}

// guard refuses a session whose workspace does not resolve to a place it
// may be: a bound directory passes the rules for local sources (the
// operator's --workspace is not held to the root-owner rule, which is for
// what token holders ask for); any other workspace must be the one warren
// made for it under the data directory.
func (m *Manager) guard(s *Session) error {
	if s.Workspace == "" {
		return fmt.Errorf("session %s has no workspace", s.ID)
	}
	if s.Mode == ModeBind {
		p := m.policy()
		p.Local = true
		if s.DefaultKey != "" {
			p.NoRootOwned = false
		}
		if _, err := workspace.CheckDir(s.Workspace, p); err != nil {
			return fmt.Errorf("session %s cannot be used: %w", s.ID, err)
		}
		return nil
	}
	want := filepath.Join(m.dataReal, "workspaces", s.ID)
	real, err := workspace.Resolve(s.Workspace)
	if err != nil {
		return fmt.Errorf("session %s: workspace %s: %w", s.ID, s.Workspace, err)
	}
	if real != want {
		return fmt.Errorf("%w: session %s cannot be used: its workspace %s is not the one warren made for it "+
			"(%s); delete the session", workspace.ErrInvalid, s.ID, real, want)
	}
	return nil
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
