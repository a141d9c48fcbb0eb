package main

import (
	"context"
	"database/sql"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/tasks"
)

// sessionFlags are the session caps every serve command takes.
func sessionFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "idle-timeout", Value: 15 * time.Minute, Usage: "stop a session's shell after this long unused; the next command restarts it in the same cwd with the same exports (0: never)"},
		&cli.IntFlag{Name: "max-sessions-per-user", Value: 50, Usage: "sessions a user may have that are not deleted (0: no cap)"},
		&cli.IntFlag{Name: "max-shells", Value: 256, Usage: "jails running at once; the least recently used idle ones are stopped to make room (0: no cap)"},
		&cli.StringFlag{Name: "quota", Value: "10G", Usage: "disk quota of each workspace under the data dir, e.g. 500M or 10G; over it, writes and commands are refused (0: none)"},
		&cli.DurationFlag{Name: "quota-interval", Value: 30 * time.Second, Usage: "how long a workspace's measured disk use is trusted before it is walked again"},
		&cli.BoolFlag{Name: "allow-host-network", Usage: "serve http: let clients give a session the server's whole network (network mode host; always allowed on stdio)"},
		&cli.BoolFlag{Name: "allow-local-sources", Usage: "serve http: let session_create clone or bind paths of this host and file:// URLs (always allowed on stdio and with --auth none)"},
	}
}

// sessionConfig reads the session caps from the flags.
func sessionConfig(c *cli.Context, dir string) (sessions.Config, error) {
	quota, err := sessions.ParseBytes(c.String("quota"))
	if err != nil {
		return sessions.Config{}, cli.Exit("--quota: "+err.Error(), 2)
	}
	return sessions.Config{
		DataDir: dir, BindDir: c.String("workspace"),
		AllowLocalSources: c.Command.Name == "stdio" || c.String("auth") == "none" || c.Bool("allow-local-sources"),
		IdleTimeout:       c.Duration("idle-timeout"), MaxSessionsPerUser: c.Int("max-sessions-per-user"),
		MaxRunningShells: c.Int("max-shells"), QuotaBytes: quota, QuotaInterval: c.Duration("quota-interval"),
	}, nil
}

// newSessionManager builds the session manager from the flags and the
// config file and starts its idle reaper; Manager.Close stops it, and stop
// the network proxy.
func newSessionManager(c *cli.Context, store *sessions.Store, db *sql.DB, dir string, log zerolog.Logger) (*sessions.Manager, func(), error) {
	cfg, err := sessionConfig(c, dir)
	if err != nil {
		return nil, nil, err
	}
	file, err := loadConfig(c, dir)
	if err != nil {
		return nil, nil, err
	}
	net, stopNet, err := networkConfig(file, db, c.Command.Name == "stdio" || c.Bool("allow-host-network"), log)
	if err != nil {
		return nil, nil, err
	}
	cfg.Network = net
	mgr, err := sessions.NewManager(store, cfg)
	if err != nil {
		stopNet()
		return nil, nil, err
	}
	mgr.StartReaper(context.Background())
	return mgr, stopNet, nil
}

// releaseClaimsOnEnd releases the task claims of a session when it is
// archived or deleted: its work stopped, so its tasks go back to the board.
func releaseClaimsOnEnd(mgr *sessions.Manager, board *tasks.Board, log zerolog.Logger) {
	if board == nil {
		return
	}
	mgr.SetOnEnd(func(ctx context.Context, id string) {
		n, err := board.ReleaseSession(ctx, id)
		if err != nil {
			log.Warn().Err(err).Str("session", id).Msg("release task claims of an ended session")
		} else if n > 0 {
			log.Info().Int("claims", n).Str("session", id).Msg("released task claims of an ended session")
		}
	})
}
