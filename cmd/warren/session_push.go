package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/events"
	"github.com/warrenhq/warren/sessions/gitpush"
)

// sessionPushCommand is 'warren session push'.
func sessionPushCommand(flags func(...cli.Flag) []cli.Flag) *cli.Command {
	return &cli.Command{Name: "push", Usage: "commit the workspace as the identity's author on top of the cloned commit and push it " +
		"to the session's source (branch warren/SESSION_ID unless --branch); never overwrites commits it did not push",
		ArgsUsage: "SESSION_ID", Flags: flags(
			&cli.StringFlag{Name: "branch", Usage: "the branch to push to (default warren/SESSION_ID)"},
			&cli.StringFlag{Name: "message", Usage: "the commit message"},
			&cli.StringFlag{Name: "identity", Usage: "push with this identity (default: the one the session was created with)"},
			&cli.StringFlag{Name: "pr-title", Usage: "open a pull request with this title (the identity needs a forge token)"},
			&cli.StringFlag{Name: "pr-body", Usage: "the pull request's description"},
			&cli.StringFlag{Name: "pr-base", Usage: "the branch the pull request merges into (default: the session's ref, else main)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		), Action: runSessionPush}
}

// gitService opens the push service over the session environment's database.
func (e *sessionEnv) gitService(c *cli.Context) (*gitpush.Service, error) {
	dir, err := dataDir(c)
	if err != nil {
		return nil, err
	}
	log, err := newLogger(c)
	if err != nil {
		return nil, err
	}
	return openGit(c, e.db, dir, e.mgr, log)
}

// createWithIdentity is 'session create --identity': the clone logs in
// with the identity, and the session remembers it for its pushes.
func createWithIdentity(c *cli.Context, e *sessionEnv, opts sessions.CreateOptions) (*sessions.Session, error) {
	name := c.String("identity")
	if name == "" {
		return e.mgr.Create(c.Context, e.user, opts)
	}
	g, err := e.gitService(c)
	if err != nil {
		return nil, err
	}
	auth, id, err := g.CloneAuth(c.Context, e.user, name, opts.Source, func(m string) { fmt.Fprintln(c.App.ErrWriter, m) })
	if err != nil {
		return nil, err
	}
	opts.Auth = auth
	s, err := e.mgr.Create(c.Context, e.user, opts)
	if err != nil {
		return nil, err
	}
	return s, g.Store.Link(c.Context, e.user, s.ID, id.ID)
}

func runSessionPush(c *cli.Context) error {
	return inSession(c, func(e *sessionEnv, id string) error {
		g, err := e.gitService(c)
		if err != nil {
			return err
		}
		o := gitpush.Options{SessionID: id, Branch: c.String("branch"), Message: c.String("message"), Identity: c.String("identity"),
			Notice: func(m string) { fmt.Fprintln(c.App.ErrWriter, m) }}
		if t := c.String("pr-title"); t != "" {
			o.PullRequest = &gitpush.PullRequest{Title: t, Body: c.String("pr-body"), Base: c.String("pr-base")}
		}
		res, err := g.Push(c.Context, e.user, o)
		if err != nil {
			return notFound(err, e.user, id)
		}
		if c.Bool("json") {
			enc := json.NewEncoder(c.App.Writer)
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		}
		fmt.Fprintf(c.App.Writer, "pushed %s to branch %s of %s\n", res.Commit, res.Branch, res.Remote)
		if res.URL != "" {
			fmt.Fprintln(c.App.Writer, res.URL)
		}
		if res.PullRequest != "" {
			fmt.Fprintln(c.App.Writer, "pull request:", res.PullRequest)
		}
		return nil
	})
}

// forgetPushes makes a deleted session's identity link and pushes go with
// it (next to its activity log), and removes at start those of sessions a
// CLI delete removed.
func forgetPushes(ctx context.Context, mgr *sessions.Manager, activity *events.Log, git *gitpush.Service, log zerolog.Logger) {
	mgr.SetOnDelete(func(ctx context.Context, id string) error {
		return errors.Join(activity.Forget(ctx, id), git.Store.Forget(ctx, id))
	})
	n, err := git.Store.Sweep(ctx, func(ctx context.Context, id string) (bool, error) {
		_, err := mgr.Store().Owner(ctx, id)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		log.Warn().Err(err).Msg("remove the pushes of deleted sessions")
	} else if n > 0 {
		log.Info().Int("sessions", n).Msg("removed the pushes of deleted sessions")
	}
}
