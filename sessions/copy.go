package sessions

import (
	"context"
	"fmt"
	"os"
	"strings"
	"unicode"

	"github.com/warrenhq/warren/sessions/workspace"
)

// ModeCopy is a copy of another session's workspace, under the data dir
// ('warren chat --fork'): as disposable as a clone.
const ModeCopy Mode = "copy"

// defaultCopyBytes bounds what a copy reads when no disk quota is set.
const defaultCopyBytes = 8 << 30

// createCopy makes a session whose workspace starts as a copy of the
// current state of user's session opts.CopyOf, uncommitted files
// included. The source is left as it was; another user's session is not
// found.
func (m *Manager) createCopy(ctx context.Context, user string, opts CreateOptions) (*Session, error) {
	if opts.Source != "" || opts.Ref != "" || (opts.Mode != "" && opts.Mode != ModeCopy) {
		return nil, fmt.Errorf("%w: copy_of makes a copy of a session: it takes no source, ref or mode", workspace.ErrInvalid)
	}
	if len(opts.Name) > 100 || strings.IndexFunc(opts.Name, unicode.IsControl) >= 0 {
		return nil, fmt.Errorf("%w: name must be at most 100 printable characters", workspace.ErrInvalid)
	}
	src, err := m.Get(ctx, user, opts.CopyOf)
	if err != nil {
		return nil, err
	}
	if st := src.State(); st == StateDeleted {
		return nil, &StateError{ID: src.ID, State: st, Action: "copy"}
	}
	release, err := m.reserve(ctx, user)
	if err != nil {
		return nil, err
	}
	defer release()

	id := NewID()
	dir := m.workspaceDir(id)
	if _, err := workspace.Prepare(ctx, workspace.Spec{Mode: workspace.Empty, Dir: dir}); err != nil {
		return nil, err
	}
	scratch, err := os.MkdirTemp(m.cfg.DataDir, ".copy-")
	if err != nil {
		forceRemove(dir)
		return nil, fmt.Errorf("copy session %s: %w", src.ID, err)
	}
	defer forceRemove(scratch)
	limit := m.cfg.QuotaBytes
	if limit <= 0 {
		limit = defaultCopyBytes
	}
	unlock := m.opLock(src.ID) // no pause, archive or snapshot of the source meanwhile
	// What is copied is what the source's runner streams from inside its
	// jail: the server opens no path of the source's workspace.
	err = m.withTree(ctx, src, func(t workspace.TreeSource) error {
		_, err := workspace.CopyTree(ctx, t, dir, scratch, limit)
		return err
	})
	unlock()
	if err != nil {
		forceRemove(dir)
		return nil, fmt.Errorf("copy session %s: %w", src.ID, err)
	}
	s := &Session{Meta: Meta{ID: id, Owner: user, Name: opts.Name, Mode: ModeCopy, Source: "session " + src.ID}, Workspace: dir}
	if err := m.setBase(ctx, s, "copy of session "+src.ID); err != nil {
		forceRemove(dir)
		forceRemove(m.auditDir(id))
		return nil, err
	}
	if err := m.store.Create(ctx, s); err != nil {
		forceRemove(dir)
		forceRemove(m.auditDir(id))
		return nil, err
	}
	return m.remember(s), nil
}
