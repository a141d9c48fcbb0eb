// Package gitpush turns a session's work into a commit on a branch of its
// source repository, and optionally a pull request. The commit is built in
// the session's audit repository, outside the jail, from a fresh snapshot
// of the workspace applied onto the commit the session was cloned from;
// nothing runs git or reads the workspace's .git on the host, so nothing
// the jail wrote there (hooks, config, alternates) takes part. It logs in
// with the user's identity (sessions/identity), never the server's.
package gitpush

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/warrenhq/warren/sessions/sqlschema"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store keeps which identity each session uses and the pushes made
// (component "gitpush").
type Store struct {
	db  *sql.DB
	Now func() time.Time
}

// OpenStore applies the tables' migrations.
func OpenStore(ctx context.Context, db *sql.DB) (*Store, error) {
	if err := sqlschema.Migrate(ctx, db, "gitpush", migrations, "migrations"); err != nil {
		return nil, err
	}
	return &Store{db: db, Now: time.Now}, nil
}

// Link records that owner's session was made with identity id.
func (s *Store) Link(ctx context.Context, owner, sessionID, identityID string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO git_session_identities (session_id, owner, identity_id, created_at)
		VALUES (?, ?, ?, ?)`, sessionID, owner, identityID, s.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("record the session's identity: %w", err)
	}
	return nil
}

// Linked returns the identity owner's session was made with ("": none).
func (s *Store) Linked(ctx context.Context, owner, sessionID string) (string, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT identity_id FROM git_session_identities WHERE session_id = ? AND owner = ?`,
		sessionID, owner).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// Result is one push.
type Result struct {
	Branch      string `json:"branch" jsonschema:"the branch pushed to"`
	Commit      string `json:"commit" jsonschema:"the commit pushed"`
	Remote      string `json:"remote" jsonschema:"the repository pushed to (the session's source)"`
	URL         string `json:"url,omitempty" jsonschema:"the branch's web page, on a forge warren knows (GitHub, GitLab, Gitea with a forge URL); omitted otherwise"`
	PullRequest string `json:"pull_request,omitempty" jsonschema:"the pull request's web page, when one was opened"`
	Parent      string `json:"parent" jsonschema:"the commit the push built on: the cloned commit, or this session's previous push to the branch"`

	// cloned is the branch the session was cloned from ("": a tag or commit).
	cloned string
}

func (s *Store) record(ctx context.Context, owner, sessionID string, r Result) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO git_pushes (session_id, seq, owner, branch, commit_id, remote, url, pr_url, created_at)
		VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM git_pushes WHERE session_id = ?), ?, ?, ?, ?, ?, ?, ?)`,
		sessionID, sessionID, owner, r.Branch, r.Commit, r.Remote, r.URL, r.PullRequest, s.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("record the push: %w", err)
	}
	return nil
}

// setPR records the pull request opened from a push.
func (s *Store) setPR(ctx context.Context, sessionID, commit, pr string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE git_pushes SET pr_url = ? WHERE session_id = ? AND commit_id = ?`,
		pr, sessionID, commit); err != nil {
		return fmt.Errorf("record the pull request: %w", err)
	}
	return nil
}

// LastPush returns the last push of a session, if any.
func (s *Store) LastPush(ctx context.Context, sessionID string) (Result, bool, error) {
	var r Result
	err := s.db.QueryRowContext(ctx, `SELECT branch, commit_id, remote, url, pr_url FROM git_pushes WHERE session_id = ?
		ORDER BY seq DESC LIMIT 1`, sessionID).Scan(&r.Branch, &r.Commit, &r.Remote, &r.URL, &r.PullRequest)
	if errors.Is(err, sql.ErrNoRows) {
		return Result{}, false, nil
	}
	if err != nil {
		return Result{}, false, fmt.Errorf("read the session's pushes: %w", err)
	}
	return r, true, nil
}

// Link says where a session's last push can be seen: its pull request,
// else its branch's page, else "branch B at COMMIT of REMOTE".
func (r Result) Link() string {
	switch {
	case r.PullRequest != "":
		return r.PullRequest
	case r.URL != "":
		return r.URL
	}
	return fmt.Sprintf("%s branch %s at %s", r.Remote, r.Branch, r.Commit)
}

// Forget removes what is kept of a deleted session: its identity link and
// its pushes (the remote keeps the branches).
func (s *Store) Forget(ctx context.Context, sessionID string) error {
	for _, q := range []string{`DELETE FROM git_session_identities WHERE session_id = ?`,
		`DELETE FROM git_pushes WHERE session_id = ?`} {
		if _, err := s.db.ExecContext(ctx, q, sessionID); err != nil {
			return fmt.Errorf("forget the pushes of session %s: %w", sessionID, err)
		}
	}
	return nil
}

// Sweep forgets the sessions that exists says are gone (deleted by a
// process that ran without this store, such as the CLI), and returns how many.
func (s *Store) Sweep(ctx context.Context, exists func(ctx context.Context, sessionID string) (bool, error)) (int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT session_id FROM git_session_identities
		UNION SELECT session_id FROM git_pushes`)
	if err != nil {
		return 0, fmt.Errorf("sweep pushes: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	n := 0
	for _, id := range ids {
		ok, err := exists(ctx, id)
		if err != nil {
			return n, err
		}
		if !ok {
			if err := s.Forget(ctx, id); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// Migrate applies the push tables' migrations to db without opening a
// store (warren migrate).
func Migrate(ctx context.Context, db *sql.DB) error {
	return sqlschema.Migrate(ctx, db, "gitpush", migrations, "migrations")
}
