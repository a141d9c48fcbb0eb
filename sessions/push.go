package sessions

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/warrenhq/warren/sessions/workspace"
)

// keepBaseIn is where a clone with an identity keeps its cloned commit:
// the session's audit repository.
func (m *Manager) keepBaseIn(id string, opts CreateOptions) string {
	if opts.Auth == nil {
		return ""
	}
	if err := os.MkdirAll(filepath.Dir(m.auditDir(id)), 0o700); err != nil {
		return ""
	}
	return m.auditDir(id)
}

// PushBase is what a push of a session builds on, taken under the
// session's op lock: the session, its audit repository with a snapshot of
// the workspace just taken, and the caller's network policy.
type PushBase struct {
	Session  *Session
	Audit    *workspace.Audit
	Snapshot string // the snapshot commit just taken
	// Incomplete lists what the snapshot left out (see
	// workspace.Audit.SnapshotForPush); a push refuses when it is not empty.
	Incomplete []string
	Policy     workspace.Policy
}

// WithPushBase snapshots user's session id into its audit repository and
// calls fn with it, holding the session's op lock so that no pause,
// archive or other snapshot interleaves. ctx passed to fn carries the
// caller's network rule for go-git's HTTP transport. The workspace is
// streamed by the session's runner inside its jail (withTree): the server
// opens no workspace path, and nothing opens its .git.
func (m *Manager) WithPushBase(ctx context.Context, user, id string, fn func(ctx context.Context, b PushBase) error) error {
	s, err := m.Get(ctx, user, id)
	if err != nil {
		return err
	}
	if st := s.State(); st == StateDeleted {
		return &StateError{ID: s.ID, State: st, Action: "push"}
	}
	defer m.opLock(s.ID)()
	a, err := m.openAudit(s.ID)
	if err != nil {
		return err
	}
	var snap string
	var incomplete []string
	err = m.withTree(ctx, s, func(src workspace.TreeSource) error {
		var err error
		snap, incomplete, err = a.SnapshotForPush(ctx, src)
		return err
	})
	if err != nil {
		return fmt.Errorf("snapshot session %s: %w", s.ID, err)
	}
	p := m.policy()
	return fn(workspace.WithNetPolicy(ctx, p), PushBase{Session: s, Audit: a, Snapshot: snap, Incomplete: incomplete, Policy: p})
}
