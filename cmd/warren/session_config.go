package main

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/events"
	"github.com/warrenhq/warren/tasks"
)

// sessionFlags are the session caps every serve command takes.
func sessionFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "idle-timeout", Value: 15 * time.Minute, Usage: "stop a session's shell after this long unused; the next command restarts it in the same cwd with the same exports (0: never)"},
		&cli.IntFlag{Name: "max-sessions-per-user", Value: 50, Usage: "sessions a user may have that are not deleted (0: no cap)"},
		&cli.IntFlag{Name: "max-shells", Value: 256, Usage: "jails running at once; the least recently used idle ones are stopped to make room (0: no cap)"},
		// Per user: two jails at their full default size (2 GiB, one core
		// each), eight at once for parallel agents; whatever a user's
		// session count, they add up to no more than that.
		&cli.IntFlag{Name: "max-shells-per-user", Value: 8, Usage: "jails one user may run at once; one more is refused until a session is paused or goes idle (0: no cap)"},
		&cli.StringFlag{Name: "memory-per-user", Value: "4G", Usage: "memory of all of a user's running jails together; past it, their biggest process is killed (0: no cap)"},
		&cli.Float64Flag{Name: "cpus-per-user", Value: 2, Usage: "CPU cores all of a user's running jails may use together (0: no cap)"},
		&cli.StringFlag{Name: "quota", Value: "10G", Usage: "disk quota of each session's workspace and home, e.g. 500M or 10G, enforced while commands run: a session that crosses it has its processes stopped, and over it commands cannot write files (0: none)"},
		&cli.DurationFlag{Name: "quota-interval", Value: 30 * time.Second, Usage: "the longest a walked disk measurement is reused while the file system shows no growth"},
		&cli.StringSliceFlag{Name: "audit-exclude", Usage: "a path (gitignore syntax, e.g. node_modules/) that session snapshots and diffs leave out; repeat for more. Nothing in a workspace can exclude anything"},
		&cli.BoolFlag{Name: "allow-host-network", Usage: "serve http: let clients give a session the server's whole network (network mode host; always allowed on stdio)"},
		&cli.BoolFlag{Name: "allow-local-sources", Usage: "serve http: let session_create clone or bind paths of this host and file:// URLs (always allowed on stdio and with --auth none)"},
		&cli.StringFlag{Name: "replica-id", EnvVars: []string{"WARREN_REPLICA_ID"}, Usage: "with --database postgres://: this replica's name in the session leases, logs and /metrics, unique among the replicas (default: hostname-pid-random; see docs/replicas.md)"},
		&cli.DurationFlag{Name: "lease-ttl", Value: 5 * time.Second, Usage: "with --database postgres://: how long a replica's lease on a session's jail lasts unless renewed: how soon another replica takes over the sessions of one that died"},
	}
}

// sessionConfig reads the session caps from the flags.
func sessionConfig(c *cli.Context, dir string) (sessions.Config, error) {
	quota, err := sessions.ParseBytes(c.String("quota"))
	if err != nil {
		return sessions.Config{}, cli.Exit("--quota: "+err.Error(), 2)
	}
	userMemory, err := sessions.ParseBytes(c.String("memory-per-user"))
	if err != nil {
		return sessions.Config{}, cli.Exit("--memory-per-user: "+err.Error(), 2)
	}
	if c.Int("max-shells-per-user") < 0 || c.Float64("cpus-per-user") < 0 {
		return sessions.Config{}, cli.Exit("--max-shells-per-user and --cpus-per-user must not be negative", 2)
	}
	user := sandbox.UserLimits{MemoryBytes: userMemory, CPUs: c.Float64("cpus-per-user"), Jails: c.Int("max-shells-per-user")}
	// The processes of a user's jails together: as many as their jails may
	// hold, written on the user's cgroup so the bound is explicit.
	user.PIDs = int64(user.Jails) * sandbox.DefaultProfile("/").Limits.PIDs
	var lease *sessions.LeaseConfig
	if isPostgresURL(c.String("database")) {
		// Replicas may share this database (and so may the CLI, for a
		// moment): one process at a time drives each session's jail.
		if c.Duration("lease-ttl") < time.Second {
			return sessions.Config{}, cli.Exit("--lease-ttl must be at least 1s", 2)
		}
		lease = &sessions.LeaseConfig{TTL: c.Duration("lease-ttl")}
		if c.Command.Name == "http" || c.Command.Name == "stdio" {
			// Only a server takes the configured id: a CLI command run
			// beside a replica (whose environment may set it) must not
			// pass for that replica, whose leases a new holder of its id
			// gives up.
			lease.ReplicaID = c.String("replica-id")
		}
	}
	return sessions.Config{
		Lease:   lease,
		DataDir: dir, BindDir: c.String("workspace"),
		AllowLocalSources: c.Command.Name == "stdio" || c.String("auth") == "none" || c.Bool("allow-local-sources"),
		// Token holders are not the operator: https to public hosts only.
		RemoteCallers: c.Command.Name == "http" && c.String("auth") != "none",
		IdleTimeout:   c.Duration("idle-timeout"), MaxSessionsPerUser: c.Int("max-sessions-per-user"),
		MaxRunningShells: c.Int("max-shells"), QuotaBytes: quota, QuotaInterval: c.Duration("quota-interval"),
		UserLimits:   user,
		AuditExclude: c.StringSlice("audit-exclude"),
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
	if cfg.Lease != nil {
		if cfg.Lease.ReplicaID == "" {
			cfg.Lease.ReplicaID = sessions.AutoReplicaID()
		}
		replica := cfg.Lease.ReplicaID
		cfg.LeaseLog = func(msg, id string, epoch int64) {
			log.Info().Str("replica", replica).Str("session", id).Int64("epoch", epoch).Msg(msg)
		}
	}
	var bound atomic.Pointer[sessions.Manager]
	stopKube, err := kubeSessions(c, &cfg, &bound, log)
	if err != nil {
		stopNet()
		return nil, nil, err
	}
	stop := func() { stopKube(); stopNet() }
	mgr, err := sessions.NewManager(store, cfg)
	if err != nil {
		stop()
		return nil, nil, err
	}
	bound.Store(mgr)
	mgr.StartReaper(context.Background())
	if id := mgr.ReplicaID(); id != "" {
		log.Info().Str("replica", id).Dur("lease_ttl", c.Duration("lease-ttl")).Msg("replica on a shared database: sessions are leased")
	}
	return mgr, stop, nil
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

// purgeDeleted makes a deleted session's activity log go with it, and
// removes at start what earlier versions (which kept tombstones), CLI
// deletes (which run without the log) or a failed delete left behind.
// Usage records stay: they are billing data.
func purgeDeleted(ctx context.Context, mgr *sessions.Manager, activity *events.Log, log zerolog.Logger) {
	mgr.SetOnDelete(activity.Forget)
	if n, err := mgr.PurgeDeleted(ctx); err != nil {
		log.Warn().Err(err).Msg("remove deleted sessions")
	} else if n > 0 {
		log.Info().Int("sessions", n).Msg("removed deleted sessions kept by an earlier version")
	}
	n, err := activity.Sweep(ctx, func(ctx context.Context, id string) (bool, error) {
		_, err := mgr.Store().Owner(ctx, id)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		log.Warn().Err(err).Msg("remove the activity logs of deleted sessions")
	} else if n > 0 {
		log.Info().Int("sessions", n).Msg("removed the activity logs of deleted sessions")
	}
}
