package main

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/sandbox/netproxy"
	"github.com/warrenhq/warren/sessions"
)

func sessionCommand() *cli.Command {
	flags := func(extra ...cli.Flag) []cli.Flag {
		return append(append([]cli.Flag{dataDirFlag(), databaseFlag(), configFlag(), tasksFlag(),
			&cli.StringFlag{Name: "user", Usage: "act on this user's sessions (default: you, the user of 'serve stdio')"},
		}, sessionFlags()...), extra...)
	}
	control := func(name, usage string) *cli.Command {
		return &cli.Command{Name: name, Usage: usage, ArgsUsage: "SESSION_ID", Flags: flags(), Action: runSessionControl}
	}
	return &cli.Command{
		Name:  "session",
		Usage: "workspace sessions, in the same data directory a running server uses",
		Description: "These commands open the database directly; SQLite (WAL, busy timeout) lets them run next to\n" +
			"'warren serve'. A running server notices a pause, archive or delete within a second and stops\n" +
			"the session's shell.",
		Subcommands: []*cli.Command{
			{Name: "create", Usage: "create a session: clone a repository, bind a directory, or start empty", Flags: append(flags(
				&cli.StringFlag{Name: "source", Usage: "a git URL, a local repository or a directory (omitted: empty)"},
				&cli.StringFlag{Name: "mode", Usage: "clone, bind or empty (default: inferred from --source)"},
				&cli.StringFlag{Name: "ref", Usage: "branch, tag or commit to check out"},
				&cli.StringFlag{Name: "name", Usage: "a label"},
				&cli.StringFlag{Name: "identity", Usage: "clone with this git identity ('warren identity ls'); 'session push' then pushes with it"},
			), networkFlags()...), Action: runSessionCreate},
			sessionPushCommand(flags),
			{Name: "net-log", Usage: "the recent decisions of the session's network proxy: what was allowed, what was refused and why",
				ArgsUsage: "SESSION_ID", Flags: flags(
					&cli.IntFlag{Name: "limit", Value: 50, Usage: "how many of the newest decisions"},
					&cli.BoolFlag{Name: "json", Usage: "print JSON"},
				), Action: runSessionNetLog},
			{Name: "ls", Usage: "list sessions (starts nothing)", Flags: flags(
				&cli.BoolFlag{Name: "all", Usage: "include sessions being deleted (a delete that could not remove their files; the next server start finishes it)"},
				&cli.BoolFlag{Name: "json", Usage: "print JSON"},
			), Action: runSessionList},
			control("pause", "save the shell's state, snapshot the workspace, stop the shell"),
			control("resume", "make a paused session active again"),
			control("archive", "snapshot the workspace and make the session read-only for good"),
			{Name: "rm", Usage: "delete a session: its workspace, activity log and records are removed (a bound directory is kept); its usage records stay",
				ArgsUsage: "SESSION_ID", Flags: flags(), Action: runSessionControl},
			{Name: "diff", Usage: "print what changed in the workspace since the session was created", ArgsUsage: "SESSION_ID",
				Flags: flags(&cli.BoolFlag{Name: "stat", Usage: "only the per-file summary"}), Action: runSessionDiff},
			{Name: "exec", Usage: "run a command in the session's jail (cd and export persist, as for the agents); " +
				"one argument is a shell command line ('make test && ls'), several are a program and its arguments, quoted as given",
				ArgsUsage: "SESSION_ID -- COMMAND...", Flags: flags(
					&cli.DurationFlag{Name: "timeout", Value: 10 * time.Minute, Usage: "kill the command after this long"},
				), Action: runSessionExec},
		},
	}
}

// sessionEnv is a manager over the data directory, for one CLI command.
type sessionEnv struct {
	db      *sql.DB
	mgr     *sessions.Manager
	user    string
	stopNet func()
}

func openSessionEnv(c *cli.Context) (*sessionEnv, error) {
	dir, cfg, db, err := openData(c)
	if err != nil {
		return nil, err
	}
	store, err := sessions.NewStore(c.Context, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	scfg, err := sessionConfig(c, dir)
	if err != nil {
		db.Close()
		return nil, err
	}
	// The CLI's user can read the data directory: local sources are theirs.
	scfg.AllowLocalSources = true
	log, err := newLogger(c)
	if err != nil {
		db.Close()
		return nil, err
	}
	// And the machine's network: host mode is theirs to choose.
	net, stopNet, err := networkConfig(cfg, db, true, log)
	if err != nil {
		db.Close()
		return nil, err
	}
	scfg.Network = net
	mgr, err := sessions.NewManager(store, scfg)
	if err != nil {
		stopNet()
		db.Close()
		return nil, err
	}
	if c.Command.Name == "archive" || c.Command.Name == "rm" {
		board, err := openBoard(c, db, cfg, dir, 0)
		if err != nil {
			db.Close()
			return nil, err
		}
		log, err := newLogger(c)
		if err != nil {
			db.Close()
			return nil, err
		}
		releaseClaimsOnEnd(mgr, board, log)
	}
	if c.Command.Name == "exec" {
		// Commands here are refused by enforced usage thresholds as shell_exec's are.
		if err := checkUsage(c, mgr, db, cfg); err != nil {
			stopNet()
			db.Close()
			return nil, err
		}
	}
	user := c.String("user")
	if user == "" {
		user = sessions.LocalUser()
	}
	return &sessionEnv{db: db, mgr: mgr, user: user, stopNet: stopNet}, nil
}

func (e *sessionEnv) close(c *cli.Context) {
	_ = e.mgr.Close(c.Context)
	e.stopNet()
	e.db.Close()
}

// sessionArg returns the SESSION_ID argument.
func sessionArg(c *cli.Context) (string, error) {
	if c.NArg() < 1 || strings.HasPrefix(c.Args().First(), "-") {
		return "", cli.Exit("usage: warren session "+c.Command.Name+" [flags] SESSION_ID (flags go before the id)", 2)
	}
	return c.Args().First(), nil
}

func notFound(err error, user, id string) error {
	if errors.Is(err, sessions.ErrNotFound) {
		return fmt.Errorf("session %s not found among %s's sessions (pass --user for another user's)", id, user)
	}
	return err
}

func runSessionCreate(c *cli.Context) error {
	e, err := openSessionEnv(c)
	if err != nil {
		return err
	}
	defer e.close(c)
	s, err := createWithIdentity(c, e, sessions.CreateOptions{Source: c.String("source"),
		Mode: sessions.Mode(c.String("mode")), Ref: c.String("ref"), Name: c.String("name"), Progress: c.App.ErrWriter,
		Network: networkFromFlags(c)})
	if err != nil {
		return err
	}
	fmt.Fprintln(c.App.Writer, s.ID)
	return nil
}

func runSessionList(c *cli.Context) error {
	e, err := openSessionEnv(c)
	if err != nil {
		return err
	}
	defer e.close(c)
	list, err := e.mgr.List(c.Context, e.user, c.Bool("all"))
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if list == nil {
			list = []sessions.Info{}
		}
		return writeJSON(c.App.Writer, list)
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tMODE\tNAME\tSOURCE\tCWD\tNETWORK\tCREATED")
	for _, s := range list {
		src := s.Source
		if s.BaseCommit != "" {
			src += "@" + s.BaseCommit[:12]
		}
		net := string(s.Network.Mode)
		if len(s.Network.Allow) > 0 {
			net += ":" + strings.Join(s.Network.Allow, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.State, s.Mode, s.Name, src, s.Cwd, net,
			s.CreatedAt.Local().Format("2006-01-02 15:04"))
	}
	return tw.Flush()
}

// inSession runs fn with the command's SESSION_ID argument and a manager
// over the data directory, closed when fn returns.
func inSession(c *cli.Context, fn func(e *sessionEnv, id string) error) error {
	id, err := sessionArg(c)
	if err != nil {
		return err
	}
	e, err := openSessionEnv(c)
	if err != nil {
		return err
	}
	defer e.close(c)
	return fn(e, id)
}

func runSessionControl(c *cli.Context) error {
	return inSession(c, func(e *sessionEnv, id string) error {
		action := c.Command.Name
		if action == "rm" {
			action = "delete"
		}
		s, err := e.mgr.Control(c.Context, e.user, id, action)
		if err != nil {
			return notFound(err, e.user, id)
		}
		fmt.Fprintf(c.App.Writer, "%s %s\n", s.ID, s.State())
		return nil
	})
}

func runSessionNetLog(c *cli.Context) error {
	return inSession(c, func(e *sessionEnv, id string) error {
		list, err := e.mgr.Store().NetworkLogOf(c.Context, e.user, id, c.Int("limit"))
		if err != nil {
			return notFound(err, e.user, id)
		}
		if c.Bool("json") {
			if list == nil {
				list = []netproxy.Decision{}
			}
			return writeJSON(c.App.Writer, list)
		}
		if len(list) == 0 {
			fmt.Fprintln(c.App.Writer, "no network activity recorded for", id)
		}
		for _, d := range list {
			// Hosts and reasons come from the jail's requests: print them plain.
			fmt.Fprintln(c.App.Writer, plainText(sessions.DecisionLine(d)))
		}
		return nil
	})
}

func runSessionDiff(c *cli.Context) error {
	return inSession(c, func(e *sessionEnv, id string) error {
		_, d, err := e.mgr.Diff(c.Context, e.user, id, 0)
		if err != nil {
			return notFound(err, e.user, id)
		}
		if c.Bool("stat") {
			for _, f := range d.Files {
				fmt.Fprintf(c.App.Writer, "%-9s +%-5d -%-5d %s\n", f.Status, f.Additions, f.Deletions, f.Path)
			}
			return nil
		}
		fmt.Fprint(c.App.Writer, d.Patch)
		return nil
	})
}

func runSessionExec(c *cli.Context) error {
	id, err := sessionArg(c)
	if err != nil {
		return err
	}
	args := c.Args().Tail()
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	command := commandLine(args)
	if strings.TrimSpace(command) == "" {
		return cli.Exit("usage: warren session exec [flags] SESSION_ID -- COMMAND...", 2)
	}
	e, err := openSessionEnv(c)
	if err != nil {
		return err
	}
	defer e.close(c)
	o, err := e.mgr.Exec(c.Context, e.user, id, command, sessions.ExecOptions{Timeout: c.Duration("timeout"),
		Progress: func(st sessions.Stream, p []byte) {
			if st == sessions.Stderr {
				os.Stderr.Write(p)
			} else {
				c.App.Writer.Write(p)
			}
		}})
	if err != nil {
		return notFound(err, e.user, id)
	}
	if o.StateErr != nil {
		// Retried until the manager closes below, which waits for it.
		fmt.Fprintln(c.App.ErrWriter, "warren:", o.StateErr)
	}
	res := o.Result
	if res.TimedOut {
		fmt.Fprintf(c.App.ErrWriter, "warren: timed out after %s\n", c.Duration("timeout"))
	}
	if res.ExitCode != 0 {
		return cli.Exit(fmt.Sprintf("the command exited with status %d", res.ExitCode), res.ExitCode)
	}
	return nil
}

// commandLine turns exec's arguments into the line the session's shell
// runs. One argument is already a shell command line (`-- 'cd x && make'`).
// Several are a program and its arguments as the user's own shell split
// them, so each is quoted again: `-- echo 'a   b'` prints "a   b", as it
// would locally, instead of losing the spaces to a plain join.
func commandLine(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// shellQuote quotes s for /bin/sh unless it is made only of characters
// that need no quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
