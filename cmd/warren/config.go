package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/tasks"
)

// config is warren's configuration file, <data-dir>/config.json unless
// --config names another. Every field is optional.
type config struct {
	// Metering holds prices, retention and usage thresholds.
	Metering metering.Config `json:"metering"`
	// TasksFile is the task board; relative to the config file's
	// directory. Empty: see boardPath.
	TasksFile string `json:"tasks_file,omitempty"`
	// Agent is the model, key and default policy of warren chat and agent_run.
	Agent chatConfig `json:"agent"`
	// Network is the network policy: default mode, presets, proxy limits.
	Network networkFileConfig `json:"network"`
	// Git holds the server key of identities and the operator's pinned
	// SSH host keys (identity.go).
	Git gitConfig `json:"git"`

	path string // where it was read from, for messages
}

// configFlag and tasksFlag are shared by serve, task and usage.
func configFlag() cli.Flag {
	return &cli.StringFlag{Name: "config", EnvVars: []string{"WARREN_CONFIG"},
		Usage: "JSON config file: metering prices, retention, thresholds, tasks_file (default <data-dir>/config.json)"}
}

func tasksFlag() cli.Flag {
	return &cli.StringFlag{Name: "tasks", EnvVars: []string{"WARREN_TASKS"},
		Usage: "the TASKS.md of the task board (default: the config's tasks_file, else <workspace>/docs/TASKS.md with --workspace, else <data-dir>/TASKS.md)"}
}

// loadConfig reads the config file. The default file may be missing (all
// defaults); a file named with --config must exist. Unknown fields are
// errors: a misspelt threshold would otherwise be silently ignored.
func loadConfig(c *cli.Context, dataDir string) (*config, error) {
	path, explicit := c.String("config"), true
	if path == "" {
		path, explicit = filepath.Join(dataDir, "config.json"), false
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	cfg := &config{path: path}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return cfg, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return nil, fmt.Errorf("config %s: %s", path, jsonError(data, err))
	}
	if dec.More() {
		return nil, fmt.Errorf("config %s: unexpected data after the JSON object", path)
	}
	if cfg.TasksFile != "" && !filepath.IsAbs(cfg.TasksFile) {
		cfg.TasksFile = filepath.Join(filepath.Dir(path), cfg.TasksFile)
	}
	return cfg, nil
}

// jsonError adds the line of a syntax or type error to its message.
func jsonError(data []byte, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	off := int64(-1)
	switch {
	case errors.As(err, &syn):
		off = syn.Offset
	case errors.As(err, &typ):
		off = typ.Offset
	}
	if off < 0 || off > int64(len(data)) {
		return err.Error()
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	return fmt.Sprintf("line %d: %v", line, err)
}

// boardPath picks the task board: --tasks, else the config's tasks_file,
// else the default session workspace's docs/TASKS.md (--workspace DIR),
// else <data-dir>/TASKS.md, shared by every user's default session. root
// is the workspace when the board is inside it (every name below it is
// the jail's: the board reaches it through a runner of its own), else
// empty.
func boardPath(c *cli.Context, cfg *config, dataDir string) (path, root string) {
	switch {
	case c.String("tasks") != "":
		path = c.String("tasks")
	case cfg.TasksFile != "":
		path = cfg.TasksFile
	case c.String("workspace") != "":
		path = filepath.Join(c.String("workspace"), "docs", "TASKS.md")
	default:
		return filepath.Join(dataDir, "TASKS.md"), ""
	}
	if ws := c.String("workspace"); ws != "" {
		abs, err1 := filepath.Abs(path)
		wsAbs, err2 := filepath.Abs(ws)
		if rel, err := filepath.Rel(wsAbs, abs); err1 == nil && err2 == nil && err == nil && filepath.IsLocal(rel) {
			return abs, wsAbs
		}
	}
	return path, ""
}

// boardCoalesce is the server's Coalesce for the task board: a change
// returns once TASKS.md holds it, changes made during a write share the
// next one, and the sync base is saved this long after changes pause.
const boardCoalesce = 200 * time.Millisecond

// openBoard opens the task board the flags and config name. coalesce is
// zero for the CLI, whose one change is written before it exits.
//
// A board in a workspace is read and written by a runner in a jail of the
// board's own (sandbox.RunnerJail), which binds the workspace and nothing
// else, started on the board's first use of its file and again whenever
// it has ended: the workspace's names are the jails', and no process
// outside a jail opens them. A board outside every workspace (the data
// directory, or a --tasks path elsewhere) is the operator's file, which
// no jail sees: the server reads and writes it itself.
func openBoard(c *cli.Context, db *sql.DB, cfg *config, dataDir string, coalesce time.Duration) (*tasks.Board, error) {
	path, root := boardPath(c, cfg, dataDir)
	opts := tasks.Options{Path: path, Coalesce: coalesce}
	if root != "" {
		j, err := sandbox.NewRunnerJail(root, sandbox.RunnerJailOptions{})
		if err != nil {
			return nil, fmt.Errorf("open task board: %w", err)
		}
		opts.File, err = tasks.RunnerFile(tasks.RunnerOptions{Conn: j.Runner, Workspace: root, Path: path, Close: j.Close})
		if err == nil {
			// Started now, before any session's jail: a root server hands
			// the workspace to the jail's uid (an ACL grant, a walk of
			// the tree) before the jails that could race it exist. A jail
			// that cannot start does not stop the board, which works from
			// the database: each call says why the file was not written.
			_, _ = j.Runner(c.Context)
		}
		if err != nil {
			j.Close()
			return nil, fmt.Errorf("open task board: %w", err)
		}
	}
	b, err := tasks.Open(c.Context, db, opts)
	if err != nil {
		if opts.File != nil {
			opts.File.Close()
		}
		return nil, fmt.Errorf("open task board: %w", err)
	}
	return b, nil
}

// openMeter opens the meter with the config's prices, retention and
// thresholds; alerts and purges are logged.
func openMeter(ctx context.Context, db *sql.DB, cfg *config, log zerolog.Logger) (*metering.Meter, error) {
	opts := cfg.Metering.Options()
	opts.OnAlert = func(a metering.Alert) {
		log.Warn().Str("threshold", a.Threshold).Str("user", a.User).Str("session", a.Session).
			Bool("enforce", a.Enforce).Msg(a.Message)
	}
	opts.OnPurge = func(n int64, err error) {
		if err != nil {
			log.Warn().Err(err).Msg("purge old usage records")
		} else if n > 0 {
			log.Info().Int64("records", n).Msg("purged usage records past the retention period")
		}
	}
	m, err := metering.Open(ctx, db, opts)
	if errors.Is(err, metering.ErrInvalid) {
		return nil, fmt.Errorf("config %s: metering: %w", cfg.path, err)
	}
	return m, err
}

// work is the task board and the meter of a serve command.
type work struct {
	board *tasks.Board
	meter *metering.Meter
	// enforce: some threshold stops shell_exec, so the server checks.
	enforce bool
	stop    func() // ends the retention loop, writes the task board
}

// openWork loads the config, opens the board and the meter, and starts
// purging usage records past the retention period (now, then daily).
func openWork(c *cli.Context, db *sql.DB, dataDir string, log zerolog.Logger) (*work, error) {
	cfg, err := loadConfig(c, dataDir)
	if err != nil {
		return nil, err
	}
	board, err := openBoard(c, db, cfg, dataDir, boardCoalesce)
	if err != nil {
		return nil, err
	}
	meter, err := openMeter(c.Context, db, cfg, log)
	if err != nil {
		board.Close(c.Context) //nolint:errcheck // nothing was changed yet
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go meter.RunRetention(ctx)
	log.Info().Str("tasks", board.Path()).Str("config", cfg.path).Msg("task board and metering ready")
	stop := func() {
		cancel()
		// Changes not yet in TASKS.md are written now; they are in the
		// database anyway, and the next start would write them.
		fctx, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		if err := board.Close(fctx); err != nil {
			log.Warn().Err(err).Str("tasks", board.Path()).Msg("write the task board at shutdown")
		}
	}
	w := &work{board: board, meter: meter, stop: stop}
	for _, t := range cfg.Metering.Thresholds {
		w.enforce = w.enforce || t.Enforce
	}
	return w, nil
}

// usageCheck is the check the session manager makes before every command
// (Manager.Exec): an enforced threshold reached refuses it; a usage store
// that cannot answer lets it run, logged, so that a broken meter does not
// take the shells down with it.
func usageCheck(meter *metering.Meter, log zerolog.Logger) sessions.UsageCheck {
	return func(ctx context.Context, user, session string) string {
		blocked, reason, err := meter.Enforced(ctx, user, session)
		if err != nil {
			log.Warn().Err(err).Str("session", session).Msg("check usage thresholds")
			return ""
		}
		if !blocked {
			return ""
		}
		return reason
	}
}

// checkUsage makes the CLI's commands in mgr's sessions refused by the
// config's enforced usage thresholds, as the server's are.
func checkUsage(c *cli.Context, mgr *sessions.Manager, db *sql.DB, cfg *config) error {
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	meter, err := openMeter(c.Context, db, cfg, log)
	if err != nil {
		return err
	}
	if meter.Enforces() {
		mgr.SetUsageCheck(usageCheck(meter, log))
	}
	return nil
}
