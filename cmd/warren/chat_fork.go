package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/agent/transcript"
	"github.com/warrenhq/warren/sessions"
)

// forkSession makes the chat work in a new session whose workspace is a
// copy of the current state of chat id's session (uncommitted files
// included); chat.Open then copies the transcript. The original session
// and chat are left as they are.
func (env *chatEnv) forkSession(ctx context.Context, id string) error {
	if env.svc == nil {
		return cli.Exit("--fork copies a session on this machine: it cannot be used with --server", exitUsage)
	}
	old, err := env.store.Get(ctx, env.user, id)
	if errors.Is(err, transcript.ErrNotFound) {
		return cli.Exit(fmt.Sprintf("--fork %s: no such chat: see 'warren chat ls'", id), exitUsage)
	}
	if err != nil {
		return err
	}
	s, err := env.svc.sessions.Create(ctx, env.user, sessions.CreateOptions{CopyOf: old.Session, Name: "fork of chat " + old.ID})
	if err != nil {
		return cli.Exit(fmt.Sprintf("--fork %s: copy session %s: %v", id, old.Session, err), exitError)
	}
	env.session, env.mode = s.ID, string(s.Mode)
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
