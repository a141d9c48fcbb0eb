package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/tasks"
)

func taskCommand() *cli.Command {
	flags := func(extra ...cli.Flag) []cli.Flag {
		return append([]cli.Flag{dataDirFlag(), databaseFlag(), configFlag(), tasksFlag(),
			&cli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Usage: "the workspace of 'serve stdio --workspace DIR': its docs/TASKS.md and its default session"},
		}, extra...)
	}
	session := &cli.StringFlag{Name: "session", Usage: "the session that holds the claim (default: your default session, the one 'serve stdio' uses)"}
	return &cli.Command{
		Name:  "task",
		Usage: "the task board (TASKS.md) shared with the agents",
		Subcommands: []*cli.Command{
			{Name: "ls", Usage: "list tasks", Action: runTaskList, Flags: flags(
				&cli.StringFlag{Name: "status", Usage: "only this status: open, in_progress, blocked or done"},
				&cli.StringFlag{Name: "owner", Usage: "only tasks of this owner"},
				&cli.BoolFlag{Name: "json", Usage: "print JSON, as the task_list tool returns it"},
			)},
			{Name: "add", Usage: "add an open task", ArgsUsage: "TITLE", Action: runTaskAdd, Flags: flags()},
			{Name: "claim", Usage: "claim a task (a lease, renewed by claiming again)", ArgsUsage: "ID", Action: runTaskClaim, Flags: flags(session)},
			{Name: "note", Usage: "append a note to a task", ArgsUsage: "ID TEXT", Action: runTaskNote, Flags: flags(session,
				&cli.StringFlag{Name: "status", Usage: "also set the status: open, in_progress, blocked or done"},
			)},
			{Name: "done", Usage: "mark a claimed task done, with the commit or PR that did it", ArgsUsage: "ID", Action: runTaskDone, Flags: flags(session,
				&cli.StringFlag{Name: "link", Usage: "the commit or pull request"},
				&cli.StringFlag{Name: "note", Usage: "a closing note"},
			)},
			{Name: "sync", Usage: "merge hand edits of TASKS.md and write the board's changes; settle conflicts", Action: runTaskSync, Flags: flags(
				&cli.StringSliceFlag{Name: "keep-file", Usage: "settle the conflict on this task by keeping the file's version; repeatable"},
				&cli.StringSliceFlag{Name: "keep-board", Usage: "settle the conflict on this task by keeping the board's version; repeatable"},
			)},
		},
	}
}

// taskEnv is what a task command works with.
type taskEnv struct {
	db    *sql.DB
	board *tasks.Board
	dir   string
}

func openTaskEnv(c *cli.Context) (*taskEnv, error) {
	dir, cfg, db, err := openData(c)
	if err != nil {
		return nil, err
	}
	b, err := openBoard(c, db, cfg, dir, 0)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &taskEnv{db: db, board: b, dir: dir}, nil
}

func (e *taskEnv) close() {
	e.board.Close(context.Background()) //nolint:errcheck // the CLI writes each change before it returns
	e.db.Close()
}

// holder is the local user in --session or their default session: the
// same session 'serve stdio' (with the same --workspace) works in.
func (e *taskEnv) holder(c *cli.Context) (tasks.Holder, error) {
	user := sessions.LocalUser()
	store, err := sessions.NewStore(c.Context, e.db)
	if err != nil {
		return tasks.Holder{}, err
	}
	mgr, err := sessions.NewManager(store, sessions.Config{DataDir: e.dir, BindDir: c.String("workspace")})
	if err != nil {
		return tasks.Holder{}, err
	}
	s, err := mgr.Get(c.Context, user, c.String("session"))
	if errors.Is(err, sessions.ErrNotFound) {
		return tasks.Holder{}, fmt.Errorf("session %q not found among %s's sessions", c.String("session"), user)
	}
	if err != nil {
		return tasks.Holder{}, err
	}
	return tasks.Holder{User: user, Session: s.ID}, nil
}

// needArgs checks the positional arguments.
func needArgs(c *cli.Context, n int, usage string) error {
	if c.NArg() < n {
		return cli.Exit("usage: warren task "+c.Command.Name+" [flags] "+usage, 2)
	}
	// Known flags were taken wherever they stood (see interspersed); what
	// looks like a flag and is left is a typo that would otherwise become
	// part of a title or a note.
	for _, a := range c.Args().Slice() {
		if strings.HasPrefix(a, "--") {
			return cli.Exit(fmt.Sprintf("%s is not a flag of warren task %s (see 'warren task %s --help'): usage: warren task %s [flags] %s",
				a, c.Command.Name, c.Command.Name, c.Command.Name, usage), 2)
		}
	}
	return nil
}

func runTaskList(c *cli.Context) error {
	e, err := openTaskEnv(c)
	if err != nil {
		return err
	}
	defer e.close()
	list, err := e.board.List(c.Context, tasks.Filter{Status: tasks.Status(c.String("status")), Owner: c.String("owner")})
	if err != nil && (list == nil || !errors.Is(err, tasks.ErrNotWritten)) {
		return err
	}
	if err != nil {
		fmt.Fprintf(c.App.ErrWriter, "warning: %v\n", err)
	}
	if c.Bool("json") {
		// The task_list tool's structured output, field for field.
		views := make([]tasks.View, len(list))
		for i, t := range list {
			views[i] = tasks.ViewOf(t)
		}
		out := struct {
			Path    string       `json:"path"`
			Tasks   []tasks.View `json:"tasks"`
			Warning string       `json:"warning,omitempty"`
		}{Path: e.board.Path(), Tasks: views}
		if err != nil {
			out.Warning = err.Error()
		}
		return writeJSON(c.App.Writer, out)
	}
	w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSTATUS\tOWNER\tCLAIMED BY\tTITLE")
	for _, t := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.ID, statusText(t), dash(t.Owner), claimText(t), t.Title)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "%d task(s) in %s\n", len(list), e.board.Path())
	return nil
}

func runTaskAdd(c *cli.Context) error {
	if err := needArgs(c, 1, "TITLE"); err != nil {
		return err
	}
	e, err := openTaskEnv(c)
	if err != nil {
		return err
	}
	defer e.close()
	t, err := e.board.Add(c.Context, strings.Join(c.Args().Slice(), " "))
	return printTask(c, "added", t, err)
}

func runTaskClaim(c *cli.Context) error {
	if err := needArgs(c, 1, "ID"); err != nil {
		return err
	}
	e, err := openTaskEnv(c)
	if err != nil {
		return err
	}
	defer e.close()
	h, err := e.holder(c)
	if err != nil {
		return err
	}
	t, err := e.board.Claim(c.Context, c.Args().First(), h, 0)
	return printTask(c, "claimed", t, err)
}

func runTaskNote(c *cli.Context) error {
	if err := needArgs(c, 2, "ID TEXT"); err != nil {
		return err
	}
	return updateTask(c, "noted", tasks.Change{Status: tasks.Status(c.String("status")),
		Note: strings.Join(c.Args().Tail(), " ")})
}

func runTaskDone(c *cli.Context) error {
	if err := needArgs(c, 1, "ID [--link URL] [--note TEXT]"); err != nil {
		return err
	}
	return updateTask(c, "done", tasks.Change{Status: tasks.StatusDone, Note: c.String("note"), Link: c.String("link")})
}

func updateTask(c *cli.Context, verb string, ch tasks.Change) error {
	e, err := openTaskEnv(c)
	if err != nil {
		return err
	}
	defer e.close()
	h, err := e.holder(c)
	if err != nil {
		return err
	}
	t, err := e.board.Update(c.Context, c.Args().First(), ch, h)
	return printTask(c, verb, t, err)
}

func runTaskSync(c *cli.Context) error {
	e, err := openTaskEnv(c)
	if err != nil {
		return err
	}
	defer e.close()
	for _, k := range []struct {
		flag string
		side tasks.Side
	}{{"keep-file", tasks.KeepFile}, {"keep-board", tasks.KeepBoard}} {
		for _, id := range c.StringSlice(k.flag) {
			if _, err := e.board.Resolve(c.Context, id, k.side); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "resolved %s, keeping the %s\n", id, strings.TrimPrefix(k.flag, "keep-"))
		}
	}
	rep, err := e.board.Sync(c.Context)
	for _, id := range rep.Imported {
		fmt.Fprintf(c.App.Writer, "imported %s from the file\n", id)
	}
	for _, id := range rep.Removed {
		fmt.Fprintf(c.App.Writer, "removed %s (deleted from the file)\n", id)
	}
	if rep.Written {
		fmt.Fprintf(c.App.Writer, "wrote %s\n", e.board.Path())
	}
	if errors.Is(err, tasks.ErrConflict) {
		return fmt.Errorf("%w: to settle one, run 'warren task sync --keep-file ID' or '--keep-board ID'", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%s is in sync\n", e.board.Path())
	return nil
}

// printTask prints a changed task. A change saved on the board but not yet
// written to the file is reported, not failed: running the command again
// would repeat it.
func printTask(c *cli.Context, verb string, t tasks.Task, err error) error {
	if err != nil && !(errors.Is(err, tasks.ErrNotWritten) && t.ID != "") {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%s %s [%s] %s", verb, t.ID, statusText(t), t.Title)
	if t.Claim != nil {
		fmt.Fprintf(c.App.Writer, " (claimed by %s until %s)", t.Claim.Holder, t.Claim.ExpiresAt.Local().Format(time.Kitchen))
	}
	if t.Link != "" {
		fmt.Fprintf(c.App.Writer, " %s", t.Link)
	}
	fmt.Fprintln(c.App.Writer)
	if err != nil {
		fmt.Fprintf(c.App.ErrWriter, "warning: %v\n", err)
	}
	return nil
}

func statusText(t tasks.Task) string {
	if t.Conflict {
		return string(t.Status) + " (CONFLICT)"
	}
	return string(t.Status)
}

func claimText(t tasks.Task) string {
	if t.Claim == nil {
		return "-"
	}
	return fmt.Sprintf("%s until %s", t.Claim.Holder, t.Claim.ExpiresAt.Local().Format(time.Kitchen))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return "@" + s
}
